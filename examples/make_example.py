"""Write the bundled example corpus, examples/tiny/docs.jsonl (deterministic; CC0-1.0).

Short stories assembled from the sentence pools below, which were written for this project,
plus what a real corpus brings: a few exact and near copies, some PII and some junk, so the
example build shows every filter at work. Run: python examples/make_example.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "tiny" / "docs.jsonl"

NAMES = [
    "Mia",
    "Leo",
    "Ava",
    "Sam",
    "Zoe",
    "Ben",
    "Ivy",
    "Max",
    "Ruby",
    "Finn",
    "Nora",
    "Eli",
    "Lily",
    "Owen",
    "Rosa",
    "Jack",
    "Tess",
    "Hugo",
    "Anna",
    "Theo",
]
ANIMALS = [
    "a small gray cat",
    "a curious puppy",
    "an old turtle",
    "a brave little mouse",
    "a sleepy owl",
    "a red fox",
    "a tiny green frog",
    "a friendly goat",
    "a shy rabbit",
    "a noisy parrot",
    "a spotted deer",
    "a busy beaver",
]
PLACES = [
    "by the river",
    "in the tall grass",
    "under the big oak tree",
    "near the old bridge",
    "behind the bakery",
    "on the sandy beach",
    "at the edge of the forest",
    "in the quiet library",
    "on top of the hill",
    "beside the pond",
    "in the garden",
    "at the busy market",
]
THINGS = [
    "a shiny blue stone",
    "a paper kite",
    "a wooden boat",
    "a lost mitten",
    "a jar of honey",
    "a map with a red cross",
    "a silver key",
    "a broken clock",
    "a basket of apples",
    "a yellow umbrella",
    "a music box",
    "a feather",
]
FEELINGS = [
    "happy",
    "worried",
    "excited",
    "proud",
    "surprised",
    "curious",
    "calm",
    "sad",
    "hopeful",
    "nervous",
]
OPENINGS = [
    "One morning, {name} walked {place} and saw {animal}.",
    "{name} loved to play {place} every afternoon.",
    "It was a windy day when {name} found {thing} {place}.",
    "Long ago, {animal} lived {place} with no friends at all.",
    "After school, {name} and {name2} went looking for {thing}.",
    "Every summer, {name}'s family visited a cabin {place}.",
]
MIDDLES = [
    "The {animal2} was {feeling}, because it could not find its way home.",
    "{name} asked {name2} for help, and together they made a plan.",
    "They followed a narrow path and counted the stones along the way.",
    "Suddenly the sky turned dark and big drops of rain began to fall.",
    "{name} remembered what grandma said: be patient and look closely.",
    "A little bird sang a song that sounded like a question.",
    "They shared {thing} and laughed until their cheeks hurt.",
    "The wind carried {thing} over the fence and into the neighbor's yard.",
    "{name2} felt {feeling} but decided to be brave anyway.",
    "Nobody knew that the {animal2} had been watching them all along.",
    "They built a tiny bridge out of sticks and leaves.",
    "{name} counted to ten, took a deep breath, and tried again.",
]
ENDINGS = [
    "In the end, everyone went home {feeling} and a little wiser.",
    "From that day on, {name} and the {animal2} were the best of friends.",
    "{name} learned that sharing makes a good day even better.",
    "That night, {name} dreamed of {thing} and smiled in the dark.",
    "The next morning, the sun came out and the world looked new.",
    "And whenever it rained, {name2} thought of that day {place}.",
]


def fill(rng: random.Random, template: str) -> str:
    name, name2 = rng.sample(NAMES, 2)
    return template.format(
        name=name,
        name2=name2,
        animal=rng.choice(ANIMALS),
        animal2=rng.choice(ANIMALS).split()[-1],
        place=rng.choice(PLACES),
        thing=rng.choice(THINGS),
        feeling=rng.choice(FEELINGS),
    )


def story(rng: random.Random) -> str:
    middle = [fill(rng, t) for t in rng.sample(MIDDLES, rng.randint(3, 6))]
    return " ".join([fill(rng, rng.choice(OPENINGS)), *middle, fill(rng, rng.choice(ENDINGS))])


def main() -> None:
    rng = random.Random(2026)
    docs: list[str] = [story(rng) for _ in range(300)]
    for i in range(0, 300, 37):  # exact copies, one with different spacing
        docs.append(docs[i] if i % 2 else docs[i].replace(". ", ".  "))
    for i in range(5, 300, 41):  # near copies: a prefix and one word changed
        docs.append("Reposted: " + docs[i].replace(" the ", " a ", 1))
    docs[10] += " Write to the author at mia.writer@example.com or call (555) 201-4477."
    docs[20] += " The story server lives at 93.184.216.34 if you want more."
    docs += ["ok", "Click here.", "#$%&*@!{}[]<>|~^" * 20, "Subscribe now!\n" * 40]
    order = list(range(len(docs)))
    rng.shuffle(order)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as fh:
        for n, i in enumerate(order):
            fh.write(json.dumps({"id": f"tiny-{n:04d}", "text": docs[i]}) + "\n")


if __name__ == "__main__":
    main()
