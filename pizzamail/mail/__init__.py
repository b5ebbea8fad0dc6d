"""Mail as values: one parse of a raw mail (:mod:`.parse`), its HTML as text (:mod:`.text`), the
user's own words in a reply (:mod:`.reply`), Message-IDs (:mod:`.ids`) and the bytes of a mail
pizzamail writes (:mod:`.build`).

A leaf: the standard library, nh3 and mail-parser-reply only, no other part of pizzamail. Everything
that reads or writes mail (intake, approvals, tools, triggers, the store's mail writer) takes it
from here.
"""
