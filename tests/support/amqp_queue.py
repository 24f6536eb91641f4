#!/usr/bin/python3
"""The test side of RabbitMQ (tests/service/amqp_relay_integration_test.cc), with pika (Debian's
python3-pika), a client nobody here wrote.

  amqp_queue.py URL setup EXCHANGE QUEUE [BIND_KEY]
      declares a durable topic exchange and a durable queue bound to it (BIND_KEY, default "#")
  amqp_queue.py URL declare EXCHANGE
      declares the durable topic exchange only (no queue bound)
  amqp_queue.py URL drain QUEUE
      takes every message in the queue (basic.get until it is empty, each acknowledged) and
      prints one JSON line per message: message_id, routing_key, content_type, delivery_mode,
      type, body
Each step has a timeout; any failure exits non-zero with the reason on stderr.
"""
import json
import sys

import pika


def connect(url):
    params = pika.URLParameters(url)
    params.socket_timeout = 5
    params.blocked_connection_timeout = 5
    params.connection_attempts = 1
    return pika.BlockingConnection(params)


def main(argv):
    url, command = argv[1], argv[2]
    connection = connect(url)
    channel = connection.channel()
    if command in ("setup", "declare"):
        channel.exchange_declare(exchange=argv[3], exchange_type="topic", durable=True)
        if command == "setup":
            bind_key = argv[5] if len(argv) > 5 else "#"
            channel.queue_declare(queue=argv[4], durable=True)
            channel.queue_bind(queue=argv[4], exchange=argv[3], routing_key=bind_key)
    elif command == "drain":
        while True:
            method, properties, body = channel.basic_get(queue=argv[3], auto_ack=False)
            if method is None:
                break
            print(json.dumps({
                "message_id": properties.message_id,
                "routing_key": method.routing_key,
                "content_type": properties.content_type,
                "delivery_mode": properties.delivery_mode,
                "type": properties.type,
                "body": body.decode("utf-8"),
            }))
            channel.basic_ack(delivery_tag=method.delivery_tag)
    else:
        print("unknown command " + command, file=sys.stderr)
        return 2
    connection.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
