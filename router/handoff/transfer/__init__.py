"""Handing a task to a person: the request, the hooks that deliver it, the dispatcher.

```python
from trustroute.router.handoff.transfer import TransferDispatcher, TransferRequest, WebhookHook
dispatcher = TransferDispatcher([WebhookHook("https://helpdesk.example/hook")], store=store)
dispatcher.dispatch(TransferRequest(input=question, reason="retrieval insufficient"))
```
"""

from trustroute.router.handoff.transfer.callable_hook import CallableHook
from trustroute.router.handoff.transfer.dispatcher import (
    HookDelivery,
    TransferDispatcher,
    TransferOutcome,
)
from trustroute.router.handoff.transfer.hook import HookRejected, TransferHook
from trustroute.router.handoff.transfer.logging_hook import LoggingHook, LoggingSettings
from trustroute.router.handoff.transfer.request import TransferRequest
from trustroute.router.handoff.transfer.webhook import (
    WebhookError,
    WebhookHook,
    WebhookRejected,
    WebhookSettings,
)

__all__ = [
    "CallableHook",
    "HookDelivery",
    "HookRejected",
    "LoggingHook",
    "LoggingSettings",
    "TransferDispatcher",
    "TransferHook",
    "TransferOutcome",
    "TransferRequest",
    "WebhookError",
    "WebhookHook",
    "WebhookRejected",
    "WebhookSettings",
]
