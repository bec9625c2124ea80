"""The values the delegates receive, in UIKit's shapes."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

#: The longest line either side may send, the newline not counted.
LINE_MAX = 65536
PROTOCOL_VERSION = 1


class AppState(str, enum.Enum):
    NOT_RUNNING = "notRunning"
    INACTIVE = "inactive"
    ACTIVE = "active"
    BACKGROUND = "background"
    SUSPENDED = "suspended"


class ConnectionEvent(str, enum.Enum):
    CONNECTED = "connected"          #: the daemon answered the hello (also after a reconnection)
    RECONNECTING = "reconnecting"    #: the daemon went away; retrying LIFECYCLE_SOCKET
    DISCONNECTED = "disconnected"    #: for good: an error from the daemon, or reconnection gave up


@dataclass(frozen=True)
class LaunchOptions:
    launched_by: str = "unknown"
    background: bool = False
    terminated_in_background: bool = False


@dataclass(frozen=True)
class SceneSession:
    """UISceneSession: the lasting identity of a scene."""
    persistent_identifier: str
    role: str
    configuration: str


@dataclass
class Scene:
    """UIScene: one connected scene."""
    session: SceneSession
    delegate: Any
    restored_state: Any
    connection_options: dict[str, Any]
    activation_state: str = "unattached"


@dataclass(frozen=True)
class Notification:
    name: str
    payload: Any = None
    payloads: list[Any] | None = None
    posts: int = 1
    dropped: int = 0
    has_payload: bool = False


@dataclass
class Message:
    """One acknowledged message of the daemon, as the library hands it to a deferred ack."""
    type: str
    id: int
    deadline_ms: int
    fields: dict[str, Any] = field(default_factory=dict)
    generation: int = 0
    acked: bool = False
    configuration: str | None = None
    state: Any = None
    has_state: bool = False
    result: str | None = None
