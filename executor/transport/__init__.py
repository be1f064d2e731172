"""KV and message channels behind one interface (`Endpoint.send` → `Transfer` with a poll state).

`fake` (in-process, tests), `tcp` (socket endpoints: in-DC direct, cross-DC via a
`link.LinkEmulator` that shapes the WAN line), `messages` (typed, versioned).
"""

from executor.transport.base import (
           Endpoint,
           PeerInfo,
           Transfer,
           TransferState,
           TransportError,
)
from executor.transport.messages import Message, MessageError, decode, encode
from executor.transport.shaping import LinkShape, TokenBucket

__all__ = ["Endpoint", "LinkShape", "Message", "MessageError", "PeerInfo", "TokenBucket", "Transfer",
           "TransferState", "TransportError", "decode", "encode"]
