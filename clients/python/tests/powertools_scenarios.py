"""AWS Lambda Powertools' idempotency utility on hookinbox's keys, with the
real `aws-lambda-powertools` package (run by tests/it/key_clients.rs, which
starts the server and names a scenario):

    python powertools_scenarios.py SCENARIO   (HOOKINBOX_KEYS_URL, HOOKINBOX_KEYS_TOKEN set)

Each scenario asserts what it promises and prints "ok SCENARIO" at the end.
"""

import sys
import threading
import time
from dataclasses import dataclass

from aws_lambda_powertools.utilities.idempotency import (
    IdempotencyConfig,
    idempotent,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.serialization.dataclass import DataclassSerializer

from hookinbox_keys import Keys, StaleFence
from hookinbox_keys.powertools import HookinboxPersistenceLayer


class Context:
    """What Powertools reads of a Lambda context: the time left."""

    function_name = "orders"
    memory_limit_in_mb = 128
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:orders"
    aws_request_id = "request"

    def __init__(self, millis_left: int = 30_000) -> None:
        self.deadline = time.monotonic() + millis_left / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def function() -> None:
    """Powertools' own `idempotent_function` example (dataclasses in and
    out, `register_lambda_context`), with the one line changed: the order's
    work runs once per order id, and a repeat gets the stored output."""
    # The one changed line: was DynamoDBPersistenceLayer(table_name=...).
    persistence_layer = HookinboxPersistenceLayer()
    config = IdempotencyConfig(event_key_jmespath="order_id")

    @dataclass
    class OrderItem:
        sku: str
        description: str

    @dataclass
    class Order:
        item: OrderItem
        order_id: int

    @dataclass
    class OrderOutput:
        order_id: int

    runs = []

    @idempotent_function(
        data_keyword_argument="order",
        config=config,
        persistence_store=persistence_layer,
        output_serializer=DataclassSerializer(model=OrderOutput),
    )
    def process_order(order: Order) -> OrderOutput:
        runs.append(order.order_id)
        return OrderOutput(order_id=order.order_id)

    def lambda_handler(event: dict, context: Context) -> OrderOutput:
        config.register_lambda_context(context)
        order_item = OrderItem(sku="fake", description="sample")
        order = Order(item=order_item, order_id=event["order_id"])
        return process_order(order=order)

    outputs = [lambda_handler({"order_id": 1}, Context()) for _ in range(3)]
    assert runs == [1], runs
    assert outputs == [OrderOutput(order_id=1)] * 3, outputs
    assert lambda_handler({"order_id": 2}, Context()) == OrderOutput(order_id=2)
    assert runs == [1, 2], runs


def handler() -> None:
    """`@idempotent` on a handler, 20 concurrent invocations of one event:
    the body runs once; the others get its response or "in progress"
    (Powertools raises rather than waits); a later one gets the response."""
    persistence_layer = HookinboxPersistenceLayer()
    runs = []

    @idempotent(persistence_store=persistence_layer)
    def lambda_handler(event: dict, context: Context) -> dict:
        runs.append(event["payment"])
        time.sleep(0.5)
        return {"payment_id": "pay_1", "message": "success", "statusCode": 200}

    answers = []

    def invoke() -> None:
        try:
            answers.append(lambda_handler({"payment": "p-concurrent"}, Context()))
        except IdempotencyAlreadyInProgressError:
            answers.append("in progress")

    callers = [threading.Thread(target=invoke) for _ in range(20)]
    for c in callers:
        c.start()
    for c in callers:
        c.join()
    assert runs == ["p-concurrent"], runs
    done = {"payment_id": "pay_1", "message": "success", "statusCode": 200}
    assert len(answers) == 20 and set(map(str, answers)) <= {str(done), "in progress"}, answers
    assert lambda_handler({"payment": "p-concurrent"}, Context()) == done
    assert runs == ["p-concurrent"], runs


def exception() -> None:
    """The function raises: the key is released, and the next invocation
    runs it again."""
    persistence_layer = HookinboxPersistenceLayer()
    runs = []

    @idempotent(persistence_store=persistence_layer)
    def lambda_handler(event: dict, context: Context) -> dict:
        runs.append(len(runs))
        if len(runs) == 1:
            raise RuntimeError("the payment provider timed out")
        return {"ok": True}

    try:
        lambda_handler({"payment": "p-exception"}, Context())
        raise AssertionError("the error must reach the caller")
    except RuntimeError:
        pass
    assert lambda_handler({"payment": "p-exception"}, Context()) == {"ok": True}
    assert lambda_handler({"payment": "p-exception"}, Context()) == {"ok": True}
    assert runs == [0, 1], runs


def validation() -> None:
    """Payload validation: the same key with another amount is refused."""
    persistence_layer = HookinboxPersistenceLayer()
    config = IdempotencyConfig(event_key_jmespath="id", payload_validation_jmespath="amount")

    @idempotent(config=config, persistence_store=persistence_layer)
    def lambda_handler(event: dict, context: Context) -> dict:
        return {"charged": event["amount"]}

    assert lambda_handler({"id": "p-validation", "amount": 10}, Context()) == {"charged": 10}
    assert lambda_handler({"id": "p-validation", "amount": 10}, Context()) == {"charged": 10}
    try:
        lambda_handler({"id": "p-validation", "amount": 20}, Context())
        raise AssertionError("IdempotencyValidationError expected")
    except IdempotencyValidationError:
        pass


def timeout() -> None:
    """An invocation that outlives the time it had (its lease): a second one
    claims the key and runs; the first one's completion is refused
    (StaleFence inside Powertools' error) and the second's response stands."""
    persistence_layer = HookinboxPersistenceLayer()
    config = IdempotencyConfig(event_key_jmespath="payment")
    runs = []

    @idempotent(config=config, persistence_store=persistence_layer)
    def lambda_handler(event: dict, context: Context) -> dict:
        runs.append(event["who"])
        if event["who"] == "first":
            time.sleep(2.5)
        return {"by": event["who"]}

    failure = []

    def first() -> None:
        try:
            lambda_handler({"payment": "p-timeout", "who": "first"}, Context(millis_left=1000))
        except IdempotencyPersistenceLayerError as e:
            failure.append(e)

    slow = threading.Thread(target=first)
    slow.start()
    time.sleep(1.5)  # the first one's second of lease has run out
    assert lambda_handler({"payment": "p-timeout", "who": "second"}, Context()) == {"by": "second"}
    slow.join()
    assert runs == ["first", "second"], runs
    assert failure and isinstance(failure[0].__cause__, StaleFence), failure
    assert lambda_handler({"payment": "p-timeout", "who": "third"}, Context()) == {"by": "second"}
    assert runs == ["first", "second"], runs


def unreachable() -> None:
    """hookinbox unreachable: Powertools raises and the function does not run."""
    persistence_layer = HookinboxPersistenceLayer(Keys("http://127.0.0.1:9", token="unused", timeout=2))

    @idempotent(persistence_store=persistence_layer)
    def lambda_handler(event: dict, context: Context) -> dict:
        raise AssertionError("must not run")

    try:
        lambda_handler({"payment": "p-down"}, Context())
        raise AssertionError("IdempotencyPersistenceLayerError expected")
    except IdempotencyPersistenceLayerError:
        pass


if __name__ == "__main__":
    name = sys.argv[1]
    globals()[name]()
    print(f"ok {name}")
