"""Learning state: execution records, per-(agent, task type) profiles and their math."""

from trustroute.profiles.book import ProfileBook
from trustroute.profiles.profile import (
    ProfileSettings,
    ProfileState,
    TaskTypeProfile,
    WindowEntry,
    empty_profile,
    ramp_confidence,
)
from trustroute.profiles.recency import RecencySettings, recency_weights, weighted_expertise
from trustroute.profiles.records import ExecutionRecord, InvalidRecord

__all__ = [
    "ExecutionRecord",
    "InvalidRecord",
    "ProfileBook",
    "ProfileSettings",
    "ProfileState",
    "RecencySettings",
    "TaskTypeProfile",
    "WindowEntry",
    "empty_profile",
    "ramp_confidence",
    "recency_weights",
    "weighted_expertise",
]
