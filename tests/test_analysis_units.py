"""Analysis logic on hand-made event sequences whose right answers are worked out by hand."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from streamdissect.analysis import analyze_events
from streamdissect.analysis.percentiles import summarize_ms

MS = 1_000_000
C = "127.0.0.1:40000-127.0.0.1:5552"


def frame(ts_ms, direction, command, response=False, conn=C, **fields):
    fields.setdefault("correlation_id", None)
    fields.setdefault("code", None)
    rec = NS(command=command, response=response, **fields)
    return NS(ts_ns=int(ts_ms * MS), connection=conn, direction=direction, record=rec)


def req(ts, command, corr, direction="c2s", **kw):
    return frame(ts, direction, command, correlation_id=corr, **kw)


def resp(ts, command, corr, code=1, direction="s2c", **kw):
    return frame(ts, direction, command, response=True, correlation_id=corr, code=code,
                 code_name="OK" if code == 1 else f"code{code}", **kw)


def test_percentiles_linear_interpolation():
    s = summarize_ms([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s["min_ms"] == 1.0 and s["max_ms"] == 5.0
    assert s["p50_ms"] == 3.0
    assert s["p75_ms"] == 4.0
    assert s["p95_ms"] == pytest.approx(4.8)
    assert summarize_ms([])["p50_ms"] is None


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 101, 4999])
def test_percentiles_are_numpys_to_the_last_bit(n):
    # np.percentile (its default, "linear") is the reference: the tables said what it says
    # before it was replaced; both forms of the sample, held as one and by rank
    import numpy as np

    from streamdissect.analysis.percentiles import percentiles, ranked_percentiles

    rng = np.random.default_rng(n)
    points = [0, 33.3, 50, 75, 95, 99, 99.9, 100]
    for sample in (rng.exponential(3.0, n), rng.integers(0, 9, n) * 0.1, rng.normal(0, 1e9, n)):
        expected = np.percentile(sample, points).tolist()
        ordered = np.sort(sample)
        assert percentiles(ordered, points) == expected
        assert percentiles(ordered.tolist(), points) == expected
        # by rank over (distinct values, counts), as an ExactSample holds them
        values, counts = np.unique(sample, return_counts=True)
        ends = np.cumsum(counts)
        at_rank = lambda k: values[int(np.searchsorted(ends, k, side="right"))]  # noqa: B023
        assert ranked_percentiles(at_rank, n, points) == expected
        assert ranked_percentiles(lambda k: ordered[k], n, points) == expected  # noqa: B023
    with_nan = np.sort(np.append(rng.exponential(3.0, n), np.nan))
    assert all(np.isnan(percentiles(with_nan, points)))
    assert all(np.isnan(ranked_percentiles(with_nan.__getitem__, n + 1, points)))


@pytest.mark.parametrize("n", [1, 2, 7, 101, 4999, 200_000])
def test_an_exact_sample_summarizes_as_numpy_does_the_whole_sample(n):
    # (np.percentile, min and max of every value are the reference; the sample, in pieces
    # as the confirms come, crosses the folds of its counts when n is large)
    import numpy as np

    from streamdissect.analysis.percentiles import PERCENTILES, ExactSample, summarize_sample

    rng = np.random.default_rng(n)
    lags_us = rng.integers(0, 40_000, n)  # whole microseconds, as a pcap's times give
    for sample in (lags_us / 1e3, rng.exponential(3.0, n), rng.integers(0, 9, n) * 0.1):
        counted = ExactSample()
        for piece in np.array_split(sample, max(1, n // 97)):
            counted.extend(piece) if len(piece) % 2 else counted.extend(piece.tolist())
        summary = summarize_sample(counted)
        assert summary["min_ms"] == sample.min() and summary["max_ms"] == sample.max()
        assert [summary[f"p{p}_ms"] for p in PERCENTILES] == np.percentile(
            sample, PERCENTILES).tolist()  # fmt: skip
        assert len(counted) == n and list(counted) == np.sort(sample).tolist()
    empty = summarize_sample(ExactSample())
    assert empty == summarize_ms([])
    with_nan = ExactSample()
    with_nan.extend([1.0, float("nan"), 2.0])
    assert all(np.isnan(v) for v in summarize_sample(with_nan).values())


@pytest.mark.parametrize("fold", [3, 64, 1 << 16])
def test_an_exact_sample_folds_as_np_unique_of_the_whole_sample(fold, monkeypatch):
    """Its distinct values and counts are np.unique's of every value given, NaNs in it or
    not (of -0.0 and 0.0, one value, the first given stands for both when no NaN is)."""
    import numpy as np

    from streamdissect.analysis.percentiles import ExactSample

    monkeypatch.setattr(ExactSample, "FOLD", fold)
    rng = np.random.default_rng(fold)
    for with_nan in (False, True):
        sample = rng.integers(-50, 50, 3000) / 8
        sample[rng.integers(0, 3000, 200)] = -0.0
        if with_nan:
            sample[rng.integers(1500, 3000, 3)] = np.nan
        counted = ExactSample()
        for piece in np.array_split(sample, 41):
            counted.extend(piece)
        values, counts = counted.distinct()
        expected, inverse = np.unique(sample, return_inverse=True)
        assert np.array_equal(values, expected, equal_nan=True)
        assert counts.tolist() == np.bincount(inverse.ravel()).tolist()
        if not with_nan:  # (-0.0 or 0.0: np.unique's sort leaves it to chance; here defined)
            first = bool(np.signbit(sample[sample == 0][0]))
            assert np.signbit(values[values == 0]).tolist() == [first]


def test_an_exact_sample_keeps_its_distinct_values_not_every_one():
    import numpy as np

    from streamdissect.analysis.percentiles import ExactSample

    counted = ExactSample()
    for _ in range(40):  # 2.6 million lags of 2,000 distinct values
        counted.extend(np.random.default_rng(_).integers(0, 2000, 1 << 16) / 1e3)
    counted.distinct()
    assert len(counted) == 40 << 16
    assert counted._values.nbytes + counted._counts.nbytes <= 2000 * 16


def test_latency_pairs_by_connection_direction_and_id():
    other = "127.0.0.1:40001-127.0.0.1:5552"
    events = [
        req(0, "Create", 1),
        req(1, "Create", 1, conn=other),  # same id on another connection
        resp(3, "Create", 1, conn=other),  # answers the other connection's request: 2 ms
        resp(10, "Create", 1, code=5),  # 10 ms
        req(20, "Delete", 2),
        req(21, "Delete", 2),  # duplicate id while pending
        resp(25, "Delete", 2),  # answers the second: 4 ms
        resp(30, "Metadata", 99),  # orphan
        req(40, "Subscribe", 3),  # never answered
        frame(50, "s2c", "ConsumerUpdate", correlation_id=3),  # server request, same id
        frame(56, "c2s", "ConsumerUpdate", response=True, correlation_id=3, code=1),
        frame(60, "s2c", "Tune"),
        frame(61.5, "c2s", "Tune"),
        frame(70, "c2s", "Credit", subscription_id=0, credit=1),
    ]
    a = analyze_events(events)
    lat = a.latency.set_index("command")
    assert lat.loc["Create", "calls"] == 2 and lat.loc["Create", "answered"] == 2
    assert lat.loc["Create", "min_ms"] == pytest.approx(2.0)
    assert lat.loc["Create", "max_ms"] == pytest.approx(10.0)
    assert lat.loc["Delete", "duplicate_ids"] == 1
    assert lat.loc["Delete", "answered"] == 1 and lat.loc["Delete", "open_requests"] == 1
    assert lat.loc["Delete", "p50_ms"] == pytest.approx(4.0)
    assert lat.loc["Metadata", "orphan_responses"] == 1 and lat.loc["Metadata", "calls"] == 0
    assert lat.loc["Subscribe", "open_requests"] == 1
    assert lat.loc["ConsumerUpdate", "answered"] == 1
    assert lat.loc["ConsumerUpdate", "p50_ms"] == pytest.approx(6.0)
    assert lat.loc["Tune", "p50_ms"] == pytest.approx(1.5)
    assert "Credit" not in lat.index
    errs = a.errors
    assert list(errs["command"]) == ["Create"] and list(errs["code"]) == [5]


def test_confirm_ledger_lags_errors_and_unconfirmed():
    events = [
        frame(0, "c2s", "Publish", publisher_id=0, publishing_ids=[1, 2, 3], record_count=3),
        frame(5, "c2s", "Publish", publisher_id=0, publishing_ids=[4, 5], record_count=12),
        frame(7, "s2c", "PublishConfirm", publisher_id=0, publishing_ids=[1, 2]),
        frame(9, "s2c", "PublishConfirm", publisher_id=0, publishing_ids=[4, 77]),
        frame(11, "s2c", "PublishError", publisher_id=0,
              errors=[{"publishing_id": 3, "code": 0x12}]),
        frame(12, "c2s", "Publish", publisher_id=1, publishing_ids=[1], record_count=1),
    ]
    a = analyze_events(events)
    rows = a.confirms.set_index("publisher_id")
    assert rows.loc[0, "published"] == 5 and rows.loc[0, "records_published"] == 15
    assert rows.loc[0, "confirmed"] == 3
    assert rows.loc[0, "errored"] == 1
    assert rows.loc[0, "unconfirmed"] == 1  # id 5
    assert rows.loc[0, "unmatched_confirms"] == 1  # id 77 never published
    assert rows.loc[0, "max_ms"] == pytest.approx(7.0)  # 1 and 2: 7 ms; 4: 4 ms
    assert rows.loc[0, "p50_ms"] == pytest.approx(7.0)
    assert rows.loc[1, "unconfirmed"] == 1
    pairs = a.publishes
    err = pairs[pairs.outcome == "errored"].iloc[0]
    assert err["publishing_id"] == 3 and err["code"] == 0x12 and err["lag_ms"] == 11.0
    backlog = a.backlog[a.backlog.publisher_id == 0]
    assert list(backlog["outstanding"]) == [3, 5, 3, 2, 1]
    assert list(a.errors["command"]) == ["PublishError"]


def deliver(ts, sid=0, chunk_id=0, records=1, committed=None):
    chunk = {"chunk_id": chunk_id, "num_records": records, "num_entries": records,
             "chunk_type": 0, "timestamp": int(ts) - 2}
    return frame(ts, "s2c", "Deliver", subscription_id=sid, chunk=chunk, record_count=records,
                 committed_chunk_id=committed, size=100, crc_ok=True)


def test_credit_ledger_and_stalls():
    events = [
        req(0, "Subscribe", 1, subscription_id=0, stream="s", credit=2),
        resp(1, "Subscribe", 1),
        deliver(10, chunk_id=0, records=5),
        deliver(20, chunk_id=5, records=5, committed=30),  # last credit used: stall from 20
        frame(120, "c2s", "Credit", subscription_id=0, credit=1),  # restored at 120
        deliver(125, chunk_id=10, records=5),  # at once: broker had more; stall again
        frame(300, "c2s", "Credit", subscription_id=0, credit=3),  # 175 ms stall
        deliver(900, chunk_id=15, records=5),  # not at once
        frame(910, "s2c", "Credit", response=True, code=4, code_name="x", subscription_id=7),
    ]
    a = analyze_events(events)
    credit = a.credit.set_index("subscription_id")
    assert credit.loc[0, "initial_credit"] == 2
    assert credit.loc[0, "credits_granted"] == 4
    assert credit.loc[0, "chunks_delivered"] == 4 and credit.loc[0, "records_delivered"] == 20
    assert credit.loc[0, "final_credit"] == 2
    assert credit.loc[0, "stall_count"] == 2
    assert credit.loc[0, "stalled_ms_total"] == pytest.approx(100.0 + 175.0)
    assert credit.loc[7, "credit_errors"] == 1
    stalls = a.stalls
    assert list(stalls["start_ns"]) == [20 * MS, 125 * MS]
    assert list(stalls["end_ns"]) == [120 * MS, 300 * MS]
    assert list(stalls["broker_had_more"]) == [True, False]
    # the balance after each frame that changed it (the Credit error names no live ledger)
    balance = a.credit_balance
    assert list(balance["ts_ns"]) == [t * MS for t in (0, 10, 20, 120, 125, 300, 900)]
    assert list(balance["balance"]) == [2, 1, 0, 1, 0, 3, 2]
    assert set(balance["subscription_id"]) == {0}
    assert list(a.errors["command"]) == ["Credit"]
    lag = a.deliveries
    assert lag["lag"].iloc[1] == 25 and lag["lag"].isna().sum() == 3
    assert lag["delivery_latency_ms"].iloc[0] == pytest.approx(2.0)


def test_credit_without_subscribe_claims_no_stall():
    a = analyze_events([deliver(1), deliver(2), frame(3, "c2s", "Credit", subscription_id=0,
                                                      credit=1)])
    assert a.stalls.empty and a.credit_balance.empty
    assert a.credit["initial_credit"].isna().all()


def test_credit_balance_of_a_refused_subscribe_is_dropped():
    a = analyze_events([req(0, "Subscribe", 1, subscription_id=0, stream="s", credit=2),
                        resp(1, "Subscribe", 1, code=2)])  # fmt: skip
    assert a.credit_balance.empty


def test_lifecycle_handshake_tune_close_and_silences():
    events = [
        req(0, "PeerProperties", 1, properties={"product": "x"}),
        resp(2, "PeerProperties", 1, properties={"product": "RabbitMQ"}),
        req(3, "SaslAuthenticate", 2, mechanism="PLAIN", username="guest"),
        resp(4, "SaslAuthenticate", 2),
        frame(5, "s2c", "Tune", frame_max=1048576, heartbeat=60),
        frame(6, "c2s", "Tune", frame_max=131072, heartbeat=1),
        req(7, "Open", 3, virtual_host="/"),
        resp(9, "Open", 3),
        frame(1000, "c2s", "Heartbeat"),
        frame(4000, "c2s", "Heartbeat"),  # 3 s silence > 2 x 1 s
        req(4001, "Close", 4, closing_code=1, closing_reason="bye"),
        resp(4002, "Close", 4),
    ]
    a = analyze_events(events)
    row = a.connections.iloc[0]
    assert row["handshake_ms"] == pytest.approx(9.0)
    assert row["user"] == "guest" and row["sasl_mechanism"] == "PLAIN" and row["vhost"] == "/"
    assert row["frame_max"] == 131072 and row["heartbeat"] == 1
    assert row["heartbeats_c2s"] == 2 and row["heartbeats_s2c"] == 0
    assert row["missed_heartbeat_gaps"] == 2  # c2s 1000 -> 4000 ms, s2c 9 -> 4002 ms
    assert row["closed_by"] == "client" and row["close_reason"] == "bye"


def test_dataframe_holds_what_fits_and_leaves_the_rest_missing():
    """Values a column's dtype cannot hold (past its range, of another type) are <NA> there,
    never an exception or a warning; the others keep their exact values, u64 ids included.
    Rows as tuples, and kept as columns (CompactRows)."""
    import warnings

    import pandas as pd

    from streamdissect.analysis.compact import CompactRows
    from streamdissect.tables.convert import dataframe

    # the deliveries table: ts, connection, sid, first offset, records, entries, chunk type,
    # chunk ts, committed, lag, latency, size, crc_ok
    good = (1, "c", 0, 2**64 - 1, 5, 1, 0, 1_700_000_000_000, 2**64 - 2, 1, 0.5, 100, True)
    odd = (2**63, None, 300, -1, "x", 2**70, 1.5, None, None, 2**64 - 1, "y", None, "z")
    compact = CompactRows(len(good))
    compact.extend([good, odd] * 3000)
    for rows in ([good, odd], compact):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            df = dataframe("deliveries", rows)
        first, second = df.iloc[0].to_dict(), df.iloc[1].to_dict()
        assert first == {"ts_ns": 1, "connection": "c", "subscription_id": 0,
                         "chunk_first_offset": 2**64 - 1, "num_records": 5, "num_entries": 1,
                         "chunk_type": 0, "chunk_timestamp_ms": 1_700_000_000_000,
                         "committed_chunk_id": 2**64 - 2, "lag": 1, "delivery_latency_ms": 0.5,
                         "size": 100, "crc_ok": True}  # fmt: skip
        missing = {name for name, value in second.items() if pd.isna(value)}
        assert missing == {"ts_ns", "connection", "chunk_first_offset", "num_records",
                           "num_entries", "chunk_timestamp_ms", "committed_chunk_id", "lag",
                           "delivery_latency_ms", "size"}  # fmt: skip
        assert second["subscription_id"] == 300 and second["crc_ok"] is True
        assert second["chunk_type"] == 1  # (a float in an int column: int(), as in the JSON)
