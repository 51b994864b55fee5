"""Handing a task to a person: the request, the hooks that deliver it, the dispatcher.

```python
from router.transfer import TransferDispatcher, TransferRequest, WebhookHook
dispatcher = TransferDispatcher([WebhookHook("https://helpdesk.example/hook")], store=store)
dispatcher.dispatch(TransferRequest(input=question, reason="retrieval insufficient"))
```
"""

from router.transfer.callable_hook import CallableHook
from router.transfer.dispatcher import HookDelivery, TransferDispatcher, TransferOutcome
from router.transfer.hook import TransferHook
from router.transfer.logging_hook import LoggingHook
from router.transfer.request import TransferRequest
from router.transfer.webhook import WebhookError, WebhookHook

__all__ = [
    "CallableHook",
    "HookDelivery",
    "LoggingHook",
    "TransferDispatcher",
    "TransferHook",
    "TransferOutcome",
    "TransferRequest",
    "WebhookError",
    "WebhookHook",
]
