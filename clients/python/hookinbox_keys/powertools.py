"""A persistence layer for AWS Lambda Powertools' idempotency utility that
keeps its records as hookinbox idempotency keys.

An `@idempotent` or `@idempotent_function` user switches by changing the
one line that makes the persistence store:

    from hookinbox_keys.powertools import HookinboxPersistenceLayer

    persistence_layer = HookinboxPersistenceLayer()   # was DynamoDBPersistenceLayer(table_name=...)

Powertools' four record operations map onto the keys API:

- put (the record "in progress") claims the key. Its lease is the time the
  invocation has left (`register_lambda_context`), or `lease` when Powertools
  knows none; the key's ttl is the config's `expires_after_seconds`. A key
  done before answers with its stored response; a key another invocation
  holds is "in progress" (`IdempotencyAlreadyInProgressError`).
- get reads the key (`GET /api/keys/{key}`).
- update (the function returned) completes the key under the claim's
  fencing token, with the response and the payload's hash. If the lease ran
  out meanwhile and another invocation claimed the key, hookinbox refuses
  the completion and `StaleFence` is raised (Powertools wraps it in
  `IdempotencyPersistenceLayerError`): the function may have run twice.
- delete (the function raised) releases the key: the next call runs it.

With payload validation (`payload_validation_jmespath`), the hash is
stored with the response and checked against a completed record. A claim
carries no payload, so a record still in progress is not checked.

hookinbox unreachable: the put fails, and Powertools raises
`IdempotencyPersistenceLayerError` without running the function (fail closed).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from typing import Any, Dict, Optional, Tuple, Union

from aws_lambda_powertools.utilities.idempotency import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import (
    STATUS_CONSTANTS,
    DataRecord,
)

from . import Keys, KeysError, StaleFence, _seconds

__all__ = ["HookinboxPersistenceLayer"]

#: hookinbox's bounds on a lease and a ttl.
_LEASE_MIN, _LEASE_MAX = 1.0, 3600.0
_TTL_MIN, _TTL_MAX = 1.0, 365 * 86400.0


def _epoch(timestamp: Optional[str]) -> Optional[float]:
    """An RFC 3339 time as hookinbox writes it, in seconds since the epoch."""
    if not timestamp:
        return None
    return dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


class HookinboxPersistenceLayer(BasePersistenceLayer):
    """Powertools idempotency records kept as keys of one `[[keys.client]]`.

    keys: a `Keys` (default: `Keys()`, the URL and token from
    HOOKINBOX_KEYS_URL and HOOKINBOX_KEYS_TOKEN).
    lease: how long an invocation holds its key when Powertools does not
    know the time it has left (no `register_lambda_context`): default 15
    minutes, the longest a Lambda function runs.
    """

    def __init__(self, keys: Optional[Keys] = None, *, lease: Union[str, float] = "15m") -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.keys = keys if keys is not None else Keys()
        self.lease = min(max(_seconds(lease), _LEASE_MIN), _LEASE_MAX)
        # The fencing token of each key held now, by the thread that claimed
        # it: Powertools puts, runs and updates in the invocation's thread.
        self._tokens: Dict[Tuple[int, str], int] = {}
        self._lock = threading.Lock()

    # -- records <-> keys ----------------------------------------------------

    @staticmethod
    def _stored(data_record: DataRecord) -> Dict[str, Any]:
        """What `complete` stores: the response as JSON, and the payload's hash."""
        stored: Dict[str, Any] = {
            "response": json.loads(data_record.response_data) if data_record.response_data else None
        }
        if data_record.payload_hash:
            stored["payload_hash"] = data_record.payload_hash
        return stored

    @staticmethod
    def _completed(idempotency_key: str, result: Any, expires_at: Optional[float]) -> DataRecord:
        stored = result if isinstance(result, dict) else {"response": result}
        response = stored.get("response")
        return DataRecord(
            idempotency_key=idempotency_key,
            status=STATUS_CONSTANTS["COMPLETED"],
            expiry_timestamp=int(expires_at) if expires_at else None,
            response_data=json.dumps(response, sort_keys=True) if response is not None else "",
            payload_hash=str(stored.get("payload_hash", "")),
        )

    @staticmethod
    def _in_progress(idempotency_key: str, lease_until: Optional[float]) -> DataRecord:
        return DataRecord(
            idempotency_key=idempotency_key,
            status=STATUS_CONSTANTS["INPROGRESS"],
            in_progress_expiry_timestamp=int(lease_until * 1000) if lease_until else None,
        )

    # -- Powertools' four operations ----------------------------------------

    def _get_record(self, idempotency_key: str) -> DataRecord:
        view = self.keys.get(idempotency_key)
        if view is None or view.get("state") == "free":
            raise IdempotencyItemNotFoundError(idempotency_key)
        if view.get("state") == "done":
            return self._completed(idempotency_key, view.get("result"), _epoch(view.get("expires_at")))
        return self._in_progress(idempotency_key, _epoch(view.get("lease_until")))

    def _put_record(self, data_record: DataRecord) -> None:
        now = time.time()
        lease = self.lease
        if data_record.in_progress_expiry_timestamp is not None:
            lease = data_record.in_progress_expiry_timestamp / 1000 - now
        ttl = (data_record.expiry_timestamp or now + 3600) - now
        claim = self.keys.claim(
            data_record.idempotency_key,
            lease=min(max(lease, _LEASE_MIN), _LEASE_MAX),
            ttl=min(max(ttl, _TTL_MIN), _TTL_MAX),
        )
        if claim.state == "claimed":
            with self._lock:
                self._tokens[(threading.get_ident(), data_record.idempotency_key)] = int(claim.token or 0)
            return
        if claim.state == "done":
            old = self._completed(data_record.idempotency_key, claim.result, None)
            self._validate_payload(data_payload=data_record, stored_data_record=old)
            self._save_to_cache(data_record=old)
            raise IdempotencyItemAlreadyExistsError(old_data_record=old)
        # Busy: another invocation holds it until its lease runs out.
        until = now + claim.retry_after if claim.retry_after else None
        raise IdempotencyItemAlreadyExistsError(old_data_record=self._in_progress(data_record.idempotency_key, until))

    def _update_record(self, data_record: DataRecord) -> None:
        key = data_record.idempotency_key
        with self._lock:
            token = self._tokens.pop((threading.get_ident(), key), None)
        if token is None:
            raise KeysError(f"key {key!r} was not claimed by this process: nothing to complete")
        answer = self.keys._call("POST", key, "complete", {"token": token, "result": self._stored(data_record)})
        if answer.status == 409:
            raise StaleFence(key, token)
        if answer.status != 200:
            raise KeysError(f"complete {key!r}: {answer.status} {answer.body}")

    def _delete_record(self, data_record: DataRecord) -> None:
        key = data_record.idempotency_key
        with self._lock:
            token = self._tokens.pop((threading.get_ident(), key), None)
        if token is None:
            return  # not ours: nothing to give up
        answer = self.keys._call("POST", key, "release", {"token": token})
        if answer.status not in (200, 404, 409):
            raise KeysError(f"release {key!r}: {answer.status} {answer.body}")
