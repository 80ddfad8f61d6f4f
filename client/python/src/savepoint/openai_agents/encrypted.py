"""EncryptedSession over a SavepointSession with the SDK's authenticated pop.

openai-agents 0.24.0's ``EncryptedSession.pop_item`` authenticates the
latest item inside the pop only when its underlying session is a
``SQLiteSession`` (it calls that class's ``_pop_item_with_validation``);
over any other session it pops first and decrypts after, so a wrong key
removes items it cannot read. This module's ``EncryptedSession`` is the
SDK's, with the authenticated pop over a ``SavepointSession`` too: an item
that fails authentication stays, unchanged and in place, and the pop raises
the SDK's ``InvalidToken``. It needs the SDK's ``encrypt`` extra
(``cryptography``). The private names it uses (``cipher``, ``_unwrap`` and
the module's ``_is_encrypted_envelope``) are those of the release the
``openai-agents`` extra pins.
"""

from __future__ import annotations

from typing import Any

from agents.extensions.memory.encrypt_session import EncryptedSession as _SDKEncryptedSession
from agents.extensions.memory.encrypt_session import _is_encrypted_envelope
from agents.items import TResponseInputItem
from agents.run_context import RunContextWrapper

from savepoint.openai_agents._session import SavepointSession

__all__ = ["EncryptedSession"]


class EncryptedSession(_SDKEncryptedSession):
    """The SDK's ``EncryptedSession`` (same constructor and methods), whose
    ``pop_item`` over a ``SavepointSession`` that keeps its own ``pop_item``
    authenticates the latest item in the save that removes it, as the SDK
    does over a ``SQLiteSession``. Over any other session it is the SDK's."""

    async def pop_item(self, *, wrapper: RunContextWrapper[Any] | None = None) -> TResponseInputItem | None:
        """Remove and return the latest readable item (expired items are
        removed and skipped, as the SDK's), or None when none is left; raise
        ``InvalidToken``, removing nothing, when the latest item was not
        encrypted with this session's key."""
        underlying = self.underlying_session
        if not (isinstance(underlying, SavepointSession) and type(underlying).pop_item is SavepointSession.pop_item):
            return await super().pop_item(wrapper=wrapper)

        def authenticate(item: TResponseInputItem) -> None:
            if _is_encrypted_envelope(item):
                # Verified without the TTL, so authenticated expired items still drain.
                self.cipher.extract_timestamp(item["payload"].encode("utf-8"))

        while True:
            enc = await underlying._pop_item_with_validation(authenticate)
            if not enc:
                return None
            item = self._unwrap(enc)
            if item is not None:
                return item
