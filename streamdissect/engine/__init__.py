"""The two engines below the pipeline (dissect.py) and the state they share."""
