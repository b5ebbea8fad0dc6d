"""The words an approval reply may use, and the one rule for reading them. Pure; no I/O.

The rule (also in the README): a reply approves only when, after the quoted mail, a signature below
``-- ``, a device line ("Sent from my iPhone") and the sender's own name are set aside, every word
left is an approval word or a courtesy ("approve, thanks"), at least one is an approval word, and
there is no question mark and no trailing-off ("ok…"). Anything else a person adds — a question, a
condition, a change of mind, a name of a thing — makes the reply feedback, never an approval. The
list below is a whitelist on purpose: a word that is not on it can only stop an approval, never
make one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

APPROVE = frozenset({
    "approve", "approved", "yes", "yep", "yup", "yeah", "y", "ok", "okay", "okey", "k", "kk", "sure",
    "confirm", "confirmed", "accept", "accepted", "agree", "agreed", "lgtm", "fine", "alright", "go",
    "proceed", "granted", "perfect", "👍", "✅", "👌",
    "go ahead", "go for it", "do it", "sounds good", "looks good", "of course", "ship it", "all good",
    # de, fr, es (the languages whose quoting and signatures are recognised too)
    "ja", "jawohl", "jep", "genehmigt", "genehmige", "freigegeben", "einverstanden", "passt", "gerne",
    "klar", "in ordnung", "oui", "ouais", "approuvé", "approuve", "d'accord", "parfait", "validé",
    "sí", "si", "vale", "claro", "aprobado", "apruebo", "de acuerdo", "adelante", "perfecto",
})
#: the approval phrases of more than one word, longest first (each is read as one word)
PHRASES = tuple(sorted((tuple(p.split()) for p in APPROVE if " " in p), key=len, reverse=True))
#: approval words that, next to a denial, make the reply a change of mind
STRONG_APPROVE = frozenset({"approve", "approved", "yes", "yep", "yeah", "ok", "okay", "sure", "lgtm",
                            "proceed", "ja", "oui", "sí", "👍", "✅"})
ALWAYS = frozenset({"always", "forever", "immer", "toujours", "siempre"})
DENY = frozenset({"deny", "denied", "reject", "rejected", "refuse", "decline", "declined", "no", "nope",
                  "n", "nein", "abgelehnt", "ablehnen", "non", "refusé", "refuser", "rechazado",
                  "rechazar", "denegado"})
#: "no problem", "no worries": not a denial (nor, being more than approval words, an approval)
NOT_A_DENIAL = frozenset({"problem", "problems", "prob", "probs", "problemo", "worries", "worry",
                          "objection", "objections", "issue", "issues", "concern", "concerns", "doubt",
                          "need", "hay", "problema", "soucis", "souci", "problème", "stress"})
#: words of a change of mind: a denial that carries one is feedback
CHANGE_OF_MIND = frozenset({"wait", "actually", "hold", "hmm", "hm", "scratch", "nevermind", "oops",
                            "instead", "eigentlich", "doch", "warte", "attends", "espera"})
COURTESY = frozenset({
    "thanks", "thank", "you", "thx", "ty", "tyvm", "please", "pls", "plz", "cheers", "best", "regards",
    "kind", "many", "a", "lot", "so", "much", "very", "hi", "hello", "hey", "dear", "thankyou",
    "it", "this", "that", "now", "just",  # filler: "just approve it"
    "danke", "bitte", "vielen", "dank", "schön", "grüße", "gruß", "viele", "liebe", "lg", "hallo",
    "merci", "beaucoup", "bonjour", "cordialement", "gracias", "por", "favor", "muchas", "saludos", "hola",
    "🙂", "😊", "🙏", "😀", "😃",
})
RETRY, SKIP = frozenset({"retry", "again"}), frozenset({"skip"})
#: a reply of nothing but these (and courtesies) stops the thread's working run
STOP = frozenset({"stop", "cancel", "abort", "halt", "stopp", "abbrechen", "anhalten", "arrête",
                  "arrêter", "arrêtez", "annule", "annuler", "annulez", "para", "parar", "detener", "cancela",
                  "cancelar", "alto"})
#: words that turn a reply around or put a condition on it; never taken for the sender's name
#: even if it has them
_NEVER_A_NAME = frozenset({"not", "never", "don't", "dont", "cancel", "stop", "but", "if", "unless",
                           "later", "nicht", "kein", "aber", "pas", "mais", "nunca", "pero",
                           # conditions and times: "approve only", "yes after" …
                           "only", "after", "before", "once", "when", "until", "till", "first", "except",
                           "provided", "tomorrow", "today", "tonight", "wenn", "nur", "erst", "morgen",
                           "heute", "sauf", "seulement", "demain", "solo", "cuando", "hasta", "mañana"})
#: extra words that may stand around an edited arguments block ("use these instead:")
EDIT = frozenset({"use", "this", "these", "here", "with", "edited", "edit", "edits", "changes", "changed",
                  "arguments", "args", "instead", "run", "send", "below", "the", "my", "like", "as",
                  "following", "is", "are", "version", "mit", "diesen", "avec", "con", "estos"})
#: punctuation and markup that carries no meaning of its own in a short reply
#: ("~" is not: "~~approve~~" is struck out)
SOFT = frozenset(".,!:;-()\"'*_`«»/\u2013\u2014\u201c\u201d\u2018\u2019")
QUESTION = frozenset("?¿")

_TOKEN = re.compile("[^\\W\\d_]+(?:['\u2019][^\\W\\d_]+)*|\\d+|\\S")
#: emoji modifiers (skin tone, variation selector, joiner) belong to the emoji before them
_MODIFIERS = re.compile("[\U0001F3FB-\U0001F3FF\uFE0E\uFE0F\u200D]")
#: "ok…", "ok..", "ok . . .", and a face that is not a smile ("approve :(", "ok ;)")
_DOUBT = re.compile(r"\.[ \t]?\.|[…‥⋯]|(?<![\w:/])[:;=]'?-?[(\[{/\\|]|(?<![\w:/]);-?[)\]D]")


@dataclass(frozen=True, kw_only=True)
class Words:
    """A reply's own words, sorted by what they may mean."""

    words: tuple[str, ...]
    """the words (lower case) in order, the sender's own name and courtesies included"""
    names: frozenset[str]
    """the sender's own name, split into words"""
    questioning: bool
    """a question mark, a trailing-off, or a sign that is not plain punctuation"""
    numbers: bool

    @classmethod
    def of(cls, text: str, names: Iterable[str] = ()) -> Words:
        text = _MODIFIERS.sub("", text)
        tokens = _joined([t.lower() for t in _TOKEN.findall(text)])
        signs = [t for t in tokens if not t[0].isalnum()]
        odd = [s for s in signs if s not in SOFT and s not in APPROVE and s not in COURTESY]
        return cls(words=tuple(t for t in tokens if t[0].isalpha() or t in APPROVE or t in COURTESY),
                   names=_name_words(names), numbers=any(t[0].isdigit() for t in tokens),
                   questioning=bool(odd) or bool(_DOUBT.search(text)))

    def only(self, *allowed: frozenset[str]) -> bool:
        """Every word is in one of ``allowed``, a courtesy or the sender's name; nothing questions."""
        if self.questioning or self.numbers:
            return False
        return all(w in COURTESY or w in self.names or any(w in a for a in allowed) for w in self.words)

    def has(self, vocabulary: frozenset[str]) -> bool:
        return any(w in vocabulary for w in self.words)

    @property
    def meaningful(self) -> tuple[str, ...]:
        """The words that are not courtesy or the sender's name."""
        return tuple(w for w in self.words if w not in COURTESY and w not in self.names)


def _joined(tokens: list[str]) -> list[str]:
    """Tokens with each approval phrase ("go ahead") made one token."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        phrase = next((p for p in PHRASES if tuple(tokens[i:i + len(p)]) == p), None)
        out.append(" ".join(phrase) if phrase else tokens[i])
        i += len(phrase) if phrase else 1
    return out


def _name_words(names: Iterable[str]) -> frozenset[str]:
    """The words of the sender's display name, except any that could change a decision."""
    found = {w.lower() for name in names for w in re.findall(r"[^\W\d_]+", name)}
    return frozenset(found - DENY - ALWAYS - CHANGE_OF_MIND - APPROVE - RETRY - SKIP - STOP - _NEVER_A_NAME)
