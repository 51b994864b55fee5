"""Router config files (YAML, TOML, JSON): schema and loading."""

from trustroute.router.config.loader import ConfigError
from trustroute.router.config.model import (
    RouterConfig,
    Section,
    StrategySection,
    load_config,
)

__all__ = [
    "ConfigError",
    "RouterConfig",
    "Section",
    "StrategySection",
    "load_config",
]
