"""An agent called in a style it has no implementation for: not the agent's failure.

LangChain runs a runnable's missing async side in a thread, but not the other way
round: a sync call (``invoke``, ``stream``, ``batch``) of a runnable that is async only
(``RunnableLambda(afunc=...)``, an async ``RunnableGenerator``, a LangGraph graph with an
``async def`` node) raises, and so does an async call (``ainvoke``, ``astream``) of a
sync-only ``RunnableGenerator``. The agent did not fail at the task: the call could not
run it, and it works when called the other way. ``RoutedRunnable`` neither records nor
counts such an attempt (it tries the next agent, as ``with_fallbacks`` does).

The rule is narrow so that an agent's own errors are still judged. An error is taken
as the mismatch only when it is the exact error LangChain or LangGraph raises for it
(its type and wording, raised by their code: the innermost frame is in
``langchain_core`` or ``langgraph``) *and* it names the style the router called the
agent in: "no synchronous implementation" on a sync call, "no asynchronous one" on an
async call. An agent whose own code calls an async-only runnable's ``invoke`` inside it
raises the same error: on a sync call that is not judged either (it cannot be told
apart), on an async call it is the agent's failure.
"""

from __future__ import annotations

import re

#: LangChain's and LangGraph's wording, by the call style it says is missing.
_NO_SYNC = re.compile(
    r'No synchronous function provided to "'            # LangGraph's nodes, tasks
    r"|Cannot (invoke|stream) a coroutine function synchronously\."  # RunnableLambda
    r"|.* only supports async methods\.$", re.DOTALL)   # RunnableGenerator
_NO_ASYNC = re.compile(r".* only supports sync methods\.$", re.DOTALL)
_RAISED_BY = ("langchain_core.", "langgraph.")


def cannot_run(error: BaseException, *, sync: bool) -> bool:
    """True when ``error`` is LangChain's or LangGraph's own error for a runnable with
    no implementation for the call style used (``sync``: invoke, stream, batch)."""
    if not isinstance(error, TypeError | NotImplementedError):
        return False
    if not (_NO_SYNC if sync else _NO_ASYNC).match(str(error)):
        return False
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    module = "" if tb is None else str(tb.tb_frame.f_globals.get("__name__", ""))
    return module.startswith(_RAISED_BY)
