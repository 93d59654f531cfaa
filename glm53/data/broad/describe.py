"""The description grammar: a sentence (or two) generated from the same tree as the code.

Each call is said with one of its primitive's phrasings, its slots filled by what its children say; a frame
turns the root's phrase into a sentence ("Return {np}.", "Check whether {np}." for a bool). Depth 2 and 3
trees may also use a composition style: `let` names an inner call first ("Let m be the words of s. Return
the length of m."), `then` computes it first and refers back to it ("Compute the words of s. Then return the
length of the result."). Frames and styles have held-out templates too (ids ".../hN"), used only by the
`phrase` split. Every choice is recorded as a phrasing id: "<primitive>/<n>" or "<primitive>/h<n>",
"frame/value/<n>", "frame/let/<n>", ..., and the style, "style/nest", "style/let" or "style/then".

Against ambiguity, three rules (simplifications, not a parser): a call's phrasing may not begin with a slot
when words of its parent stand right before it ("x plus y times z" is said "x plus the product of y and z");
a call whose phrasing ends with a slot gets a comma when its parent's words follow ("the sum of x and y,
plus z"), unless they begin with a verb ("is", "contains"...), and parentheses when they begin with a comma
("half of (x plus y), rounded down"); an inner call with no phrasing fit for its place, or whose phrasing
holds a comma and is followed by words, is put in parentheses ("whether (x if c, otherwise y) exceeds z").
What remains ambiguous is caught by task_draw.py's description map.
"""

from __future__ import annotations

import random
import re
import string
import textwrap

from .identifiers import TYPE_NOUNS
from .input_values import describe_literal

FRAMES = {
    "value": (("Return {np}.", "Compute and return {np}.", "Give back {np}.", "The function returns {np}.",
               "Find {np}."), ("Produce {np} as the result.",)),
    "truth": (("Return whether {np}.", "Return True if {np}, otherwise False.", "Check whether {np}.",
               "Tell if {np}."), ("Answer True exactly when {np}, and False otherwise.",)),
    "let": (("Let {var} be {np}.", "Write {var} for {np}.", "Define {var} as {np}."), ("Use {var} to mean {np}.",)),
    "then": (("Compute {np}.", "First find {np}."), ("Start from {np}.",)),
}
THEN_REFERENTS = ("the result", "that", "it")  # by then-template index; the held-out one says "it"
LET_VARS = ("m", "t", "r", "y", "z", "w", "q", "u", "p", "v")
BOOL_LEAF = ("{name} is true", "{name} is set", "{name} holds")
P_STYLE = {"nest": 0.6, "let": 0.2, "then": 0.2}
P_ANONYMOUS = 0.25
WIDTH = 76  # characters of description per comment line, after "# "


def held_out_frame_ids() -> frozenset[str]:
    return frozenset(f"frame/{group}/h{i}" for group, (_, held) in FRAMES.items() for i in range(len(held)))


def _pieces(template: str):
    return [(text, field) for text, field, _, _ in string.Formatter().parse(template)]


# a child's phrase that ends with a slot needs no comma before these: "the first number of xs is above 0"
VERBS = frozenset("is are does do has have exceeds equals contains begins starts ends finishes occurs occur appears "
                  "appear shows show reads divides matches includes leaves holds remain remains".split())


# a clause after these is not read as attached to what precedes ("it is not true that x is even")
INTRODUCERS = frozenset("that whether if when unless either both holds:".split())


def _words_before(text: str, inherited: bool) -> bool:
    words = text.split()
    return inherited if not words else words[-1] not in INTRODUCERS


def _words_follow(text: str) -> bool:
    return bool(text.strip()) and text.lstrip()[0] not in ".,;:()"


def _needs_comma(text: str) -> bool:
    return _words_follow(text) and text.split()[0] not in VERBS


class _Speaker:
    def __init__(self, rng: random.Random, registry, arg_names, nouns: dict, held_node, aliases: dict):
        self.rng, self.registry, self.arg_names = rng, registry, arg_names
        self.nouns, self.held_node, self.aliases = nouns, held_node, aliases
        self.ids: list[str] = []

    def say(self, node, left_words: bool = False, right_words: bool = False, inner: bool = False):
        """(text, ends with a slot) for a node. `left_words`/`right_words`: a parent's words stand right
        before/after it; `inner`: the node is said inside another call's phrase."""
        if id(node) in self.aliases:
            return self.aliases[id(node)], False
        if node.arg is not None:
            name = self.nouns.get(node.arg, self.arg_names[node.arg])
            return (self.rng.choice(BOOL_LEAF).format(name=name) if node.type == "bool" else name), False
        if node.sig is None:
            return describe_literal(node.value, self.rng), False
        prim, held = node.sig.prim, node is self.held_node
        options = [(pid, text) for pid, text, is_held in prim.phrasing_ids() if is_held == held]
        children = dict(zip(node.sig.slots, node.children))
        # a child call is not said twice ("1 when the sum of x and y is positive, -1 when the sum of x...")
        once = [o for o in options if all(o[1].count("{" + s + "}") < 2 or not c.is_call for s, c in children.items())]
        options = once or options
        closed = [o for o in options if not o[1].startswith("{")]
        if left_words and closed and not held:
            options = closed
        pid, template = self.rng.choice(options)
        self.ids.append(pid)
        pieces = _pieces(template)
        open_left = pieces[0][1] not in (None, "item", "items") and not pieces[0][0]
        open_right = pieces[-1][1] not in (None, "item", "items")
        words = "".join(text for text, _ in pieces)
        # no unambiguous way left: group it ("whether (x if c, otherwise y) exceeds z")
        paren = inner and ((open_left and left_words) or ("," in words and right_words))
        if paren:
            left_words = right_words = False
        item, items = self.registry.nouns(node.sig)
        out = []
        for n, (text, field) in enumerate(pieces):
            out.append(text)
            if field is None:
                continue
            if field in ("item", "items"):
                out.append(item if field == "item" else items)
                continue
            child = children[field]
            after = pieces[n + 1][0] if n + 1 < len(pieces) else ""
            last = n + 1 == len(pieces)
            said, child_open_right = self.say(child, _words_before("".join(out), left_words),
                                              _words_follow(after) or (last and right_words), True)
            if child.is_call and child_open_right and id(child) not in self.aliases:
                if after.lstrip().startswith(","):
                    said = f"({said})"  # "half of (x plus y), rounded down"
                elif _needs_comma(after):
                    said += ","
            out.append(said)
        if paren:
            return "(" + "".join(out) + ")", False
        return "".join(out), open_right


def _frame(rng: random.Random, group: str, held: bool) -> tuple[str, str]:
    in_stream, held_out = FRAMES[group]
    if held:
        i = rng.randrange(len(held_out))
        return f"frame/{group}/h{i}", held_out[i]
    i = rng.randrange(len(in_stream))
    return f"frame/{group}/{i}", in_stream[i]


def describe(program, arg_names, rng: random.Random, registry, held: str | None = None):
    """(description, phrasing ids, names of description-only variables). `held`: None, "frame" (a held-out
    frame or style template) or "call" (a held-out phrasing of one call)."""
    calls = program.calls()
    inner = [n for n in calls if n is not program.root and n.type != "bool"]  # "Let m be x is even." is no sentence
    styles = ["nest"] + (["let", "then"] if inner else [])
    style = rng.choices(styles, [P_STYLE[s] for s in styles])[0]
    held_node = rng.choice(calls) if held == "call" else None
    held_frame_group = None
    if held == "frame":
        held_frame_group = rng.choice(["value" if program.root.type != "bool" else "truth"]
                                      + ([style] if style != "nest" else []))
    types = program.arg_types
    nouns = {}
    unique = [j for j, t in enumerate(types) if t != "bool" and types.count(t) == 1]
    if unique and rng.random() < P_ANONYMOUS:
        j = rng.choice(unique)
        nouns[j] = rng.choice(TYPE_NOUNS[types[j]])
    aliases, sentences, ids, variables = {}, [], [], []
    speaker = _Speaker(rng, registry, arg_names, nouns, held_node, aliases)
    if style != "nest":
        target = rng.choice(inner)
        fid, template = _frame(rng, style, held_frame_group == style)
        text, _ = speaker.say(target)
        if style == "let":
            var = rng.choice([v for v in LET_VARS if v not in arg_names])
            variables.append(var)
            sentences.append(template.format(var=var, np=text))
            aliases[id(target)] = var
        else:
            sentences.append(template.format(np=text))
            aliases[id(target)] = THEN_REFERENTS[2 if "/h" in fid else int(fid.rsplit("/", 1)[1])]
        ids += [f"style/{style}", fid]
    else:
        ids.append("style/nest")
    group = "truth" if program.root.type == "bool" else "value"
    fid, template = _frame(rng, group, held_frame_group == group)
    text, _ = speaker.say(program.root)
    sentence = template.format(np=text)
    if style == "then":
        sentence = "Then " + sentence[0].lower() + sentence[1:]
    sentences.append(sentence)
    return " ".join(sentences), ids + [fid] + speaker.ids, variables


def wrap_description(description: str, width: int = WIDTH) -> list[str]:
    """The description's lines, wrapped at `width`; a quoted literal (' ', 'a b') is never split across lines."""
    protected = re.sub(r"'[^']*'", lambda m: m.group(0).replace(" ", "\x00"), description)
    return [line.replace("\x00", " ") for line in textwrap.wrap(protected, width, break_long_words=False,
                                                                break_on_hyphens=False)]


def comment_lines(description: str) -> list[str]:
    """Wrapped at WIDTH (wrap_description), each line a comment."""
    return ["# " + line for line in wrap_description(description)]
