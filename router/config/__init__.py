"""Router config files (YAML, TOML, JSON): schema and loading."""

from trustroute.router.config.loader import ConfigError
from trustroute.router.config.model import (
    ProfilesSection,
    RecencySection,
    RouterConfig,
    Section,
    StoreSection,
    StrategySection,
    load_config,
)

__all__ = [
    "ConfigError",
    "ProfilesSection",
    "RecencySection",
    "RouterConfig",
    "Section",
    "StoreSection",
    "StrategySection",
    "load_config",
]
