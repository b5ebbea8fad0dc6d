"""The command table: which handler runs each command, and in which states it is allowed."""

from __future__ import annotations

from pizzamail.imap import folders, login, selected, session
from pizzamail.imap.session import Spec, State

_ANYWHERE = frozenset(State) - {State.LOGOUT}
_BEFORE_LOGIN = frozenset({State.NOT_AUTHENTICATED})
_LOGGED_IN = frozenset({State.AUTHENTICATED, State.SELECTED})
_SELECTED = frozenset({State.SELECTED})

COMMANDS: dict[str, Spec] = {
    "CAPABILITY": Spec(session.capability, _ANYWHERE),
    "NOOP": Spec(session.noop, _ANYWHERE),
    "LOGOUT": Spec(session.logout, _ANYWHERE),
    "ID": Spec(session.ident, _ANYWHERE),
    "STARTTLS": Spec(login.starttls, _BEFORE_LOGIN),
    "LOGIN": Spec(login.login, _BEFORE_LOGIN),
    "AUTHENTICATE": Spec(login.authenticate, _BEFORE_LOGIN),
    "ENABLE": Spec(session.enable, _LOGGED_IN),
    "NAMESPACE": Spec(session.namespace, _LOGGED_IN),
    "IDLE": Spec(selected.idle, _LOGGED_IN),
    "CHECK": Spec(session.noop, _SELECTED),
    **{name: Spec(handler, _LOGGED_IN) for name, handler in folders.HANDLERS.items()},
    **{name: Spec(handler, _SELECTED) for name, handler in selected.HANDLERS.items()},
}
