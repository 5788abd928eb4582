"""streamdissect: RabbitMQ Stream protocol captures turned into typed records and answers."""

__version__ = "0.1.0"
