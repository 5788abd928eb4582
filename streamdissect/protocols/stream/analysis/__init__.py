"""RabbitMQ Stream's analyses: request latency, publish confirms, credit, consumer lag, lifecycle, errors."""
