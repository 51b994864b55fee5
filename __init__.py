"""trustroute: route each task to the agent most likely to do it well, learn from every
outcome, and know when to hand a task to a person.

```python
from trustroute import AgentRouter
router = AgentRouter(["researcher", "writer"], store="mem://")
decision = router.select("summarise")
router.record(decision, success=True, quality=0.9)
```

The LangChain runnables live in ``trustroute.integrations.langchain``.
"""

from trustroute.profiles.records import ExecutionRecord, InvalidRecord
from trustroute.profiles.store import DuplicateRecord, Store, StoreError
from trustroute.router import (
    AgentAtCapacity,
    AgentRateLimited,
    AgentRouter,
    AgentSpec,
    CandidateScore,
    CapacityTimeout,
    Lease,
    NoAgentAvailable,
    RouterError,
    RoutingDecision,
    UnknownAgent,
    UnknownStrategy,
)
from trustroute.router.handoff import ConfidenceResult, RetrievalConfidence
from trustroute.router.handoff.transfer import (
    CallableHook,
    LoggingHook,
    TransferDispatcher,
    TransferRequest,
    WebhookHook,
)

__version__ = "0.1.0"

__all__ = [
    "AgentAtCapacity",
    "AgentRateLimited",
    "AgentRouter",
    "AgentSpec",
    "CallableHook",
    "CandidateScore",
    "CapacityTimeout",
    "ConfidenceResult",
    "DuplicateRecord",
    "ExecutionRecord",
    "InvalidRecord",
    "Lease",
    "LoggingHook",
    "NoAgentAvailable",
    "RetrievalConfidence",
    "RouterError",
    "RoutingDecision",
    "Store",
    "StoreError",
    "TransferDispatcher",
    "TransferRequest",
    "UnknownAgent",
    "UnknownStrategy",
    "WebhookHook",
]
