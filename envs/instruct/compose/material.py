"""What Instruct-v0's tasks are about: subjects, sentence templates, word lists, phrases and
short texts in five other languages. A data table: only literals and small pickers.

Sentences are written without commas on purpose where the wording allows (a "no commas" task
must still have something to say), and never start with ``*`` or ``-`` (they would read as
bullets). Not here: how a response is put together (``draft.py``) or what a constraint asks
(``constraints.py``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Subject:
    """A thing to write about: its name and the terms a response about it mentions."""

    name: str
    terms: tuple[str, ...]


SUBJECTS = (
    Subject("a neighbourhood bakery", ("bread", "oven", "flour", "morning")),
    Subject("a community garden", ("soil", "tomatoes", "volunteers", "water")),
    Subject("a small bicycle repair shop", ("wheels", "brakes", "chain", "riders")),
    Subject("a public library branch", ("books", "readers", "shelves", "librarian")),
    Subject("a mountain hiking trail", ("summit", "boots", "weather", "path")),
    Subject("a family run coffee roaster", ("beans", "roast", "aroma", "grinder")),
    Subject("a city recycling programme", ("plastic", "bins", "glass", "collection")),
    Subject("a weekend farmers market", ("stalls", "apples", "honey", "farmers")),
    Subject("a night train journey", ("carriage", "tickets", "station", "sleep")),
    Subject("a home solar panel installation", ("panels", "roof", "battery", "sunlight")),
    Subject("a beginner pottery class", ("clay", "wheel", "glaze", "kiln")),
    Subject("a local swimming pool", ("lanes", "lifeguard", "swimmers", "towels")),
    Subject("a school science fair", ("experiments", "students", "judges", "posters")),
    Subject("a volunteer beach cleanup", ("sand", "litter", "tide", "gloves")),
    Subject("a remote team offsite", ("agenda", "workshops", "colleagues", "dinner")),
    Subject("an electric car charging station", ("chargers", "cables", "drivers", "power")),
    Subject("a vintage record store", ("vinyl", "albums", "collectors", "turntable")),
    Subject("a rooftop beekeeping project", ("bees", "hives", "honey", "flowers")),
    Subject("a village music festival", ("stage", "bands", "tents", "crowd")),
    Subject("a new hospital wing", ("patients", "nurses", "wards", "equipment")),
)

RECIPIENTS = ("a new neighbour", "the town council", "a former teacher", "our customers", "a friend abroad", "the project team")  # fmt: skip

WRITING_REQUESTS = (
    "Write a short blog post about {subject}.",
    "Write a letter to {recipient} about {subject}.",
    "Write a product description for {subject}.",
    "Write a short speech that introduces {subject}.",
    "Write an email to {recipient} describing {subject}.",
    "Write a newsletter item about {subject}.",
    "Write a short story set at {subject}.",
    "Write a review of {subject}.",
)

SENTENCES = (
    "People who visit {subject} usually ask about the {term} first.",
    "The {term} is what makes {subject} feel special.",
    "We spent a long time getting the {term} just right.",
    "There is a simple reason why the {term} matters so much here.",
    "Nobody expected the {term} to become such a popular topic.",
    "Every season brings a new story about the {term}.",
    "The team checks the {term} carefully at the start of each day.",
    "Regular visitors say the {term} has improved a great deal this year.",
    "It is easy to forget how much planning the {term} needs.",
    "Small changes to the {term} have made a real difference.",
    "Good news travels fast when the {term} is in great shape.",
    "Our plans for the next few months start with the {term}.",
    "Ask anyone nearby and they will tell you about the {term}.",
    "Some of the best moments at {subject} begin with the {term}.",
    "A quiet afternoon is the perfect time to look at the {term}.",
    "Newcomers often learn about the {term} from their friends.",
    "The {term}, like everything else here, gets plenty of attention.",
    "When the weather turns, the {term} needs a little extra care.",
)

QUESTIONS = (
    "Is {subject} worth a visit for someone who has never been?",
    "Should a small town invest in {subject}?",
    "Would you recommend {subject} to a busy family?",
    "Can {subject} work well without a large budget?",
)

EXTRA_WORDS = (
    "lantern", "harbor", "compass", "velvet", "meadow", "puzzle", "orbit", "canyon", "glacier",
    "ribbon", "falcon", "pepper", "marble", "thunder", "whistle", "anchor", "cactus", "quartz",
    "jigsaw", "zephyr", "kettle", "oyster", "saddle", "tundra", "violin", "walnut", "yogurt",
)  # fmt: skip
"""Words that no sentence template or subject uses: keywords and forbidden words."""

SHOUTED = ("IMPORTANT", "NEW", "FREE", "TODAY", "NOW", "GREAT", "BEST", "ALWAYS", "NEVER", "SOON")

START_PHRASES = ("Here is my answer", "Let me begin", "To start with", "First things first")
END_PHRASES = ("Is there anything else I can help with?", "Let me know if you have additional questions.", "Thank you for reading.", "That is all for now.")  # fmt: skip
FIRST_WORDS = ("today", "meanwhile", "finally", "overall", "honestly", "luckily")
SECTION_WORDS = ("SECTION", "PART", "Section", "Part")
POSTSCRIPT_MARKERS = ("P.S.", "P.P.S")
PLACEHOLDERS = ("[name]", "[address]", "[date]", "[phone number]", "[company]", "[time]", "[email]")  # fmt: skip
POSTSCRIPTS = ("We hope to see you there soon.", "Doors open early on weekends.", "Bring a friend along next time.")  # fmt: skip

FOREIGN = {
    "de": (
        "Das Wetter war heute sehr schön und wir sind lange spazieren gegangen.",
        "Unsere Nachbarn haben uns zu einem gemütlichen Abendessen eingeladen.",
        "Die Kinder spielen gern im Garten hinter dem Haus.",
        "Wir freuen uns sehr auf den nächsten Besuch bei euch.",
        "Am Wochenende fahren wir mit dem Zug in die Berge.",
        "Das neue Geschäft in der Straße verkauft frisches Brot und Kuchen.",
    ),
    "fr": (
        "Le temps était magnifique aujourd'hui et nous avons marché longtemps.",
        "Nos voisins nous ont invités à un dîner très agréable.",
        "Les enfants aiment beaucoup jouer dans le jardin derrière la maison.",
        "Nous avons hâte de vous revoir très bientôt.",
        "Ce week-end nous prenons le train pour aller à la montagne.",
        "La nouvelle boutique de la rue vend du pain frais et des gâteaux.",
    ),
    "es": (
        "Hoy hizo un tiempo estupendo y caminamos durante mucho tiempo.",
        "Nuestros vecinos nos invitaron a una cena muy agradable.",
        "A los niños les gusta mucho jugar en el jardín detrás de la casa.",
        "Tenemos muchas ganas de volver a veros muy pronto.",
        "Este fin de semana vamos en tren a las montañas.",
        "La nueva tienda de la calle vende pan fresco y pasteles.",
    ),
    "it": (
        "Oggi il tempo era bellissimo e abbiamo camminato a lungo.",
        "I nostri vicini ci hanno invitato a una cena molto piacevole.",
        "Ai bambini piace molto giocare nel giardino dietro la casa.",
        "Non vediamo l'ora di rivedervi molto presto.",
        "Questo fine settimana andiamo in montagna con il treno.",
        "Il nuovo negozio della via vende pane fresco e dolci.",
    ),
    "pt": (
        "Hoje o tempo estava lindo e nós caminhamos durante muito tempo.",
        "Os nossos vizinhos convidaram-nos para um jantar muito agradável.",
        "As crianças gostam muito de brincar no jardim atrás da casa.",
        "Estamos ansiosos por voltar a ver vocês muito em breve.",
        "Neste fim de semana vamos de comboio para as montanhas.",
        "A nova loja da rua vende pão fresco e bolos.",
    ),
}
LANGUAGE_NAMES = {"de": "German", "fr": "French", "es": "Spanish", "it": "Italian", "pt": "Portuguese"}  # fmt: skip

FACT_NAMES = ("Ada Moreno", "Bram Keller", "Chiara Santos", "Dev Patel", "Elin Berg", "Farah Nasser", "Goran Petrov", "Hana Sato")  # fmt: skip
FACT_SENTENCES = (
    "{name} started {subject} in {year} with a handful of helpers.",
    "By {year} the project had {count} regular supporters.",
    "{name} says the {term} was the hardest part to get right.",
    "Last spring about {count} people came to see the {term}.",
    "The budget for the {term} was raised in {year}.",
    "{name} now leads a group of {count} volunteers.",
)


def sentence(rng: random.Random, subject: Subject, term: str | None = None) -> str:
    """One English sentence about ``subject`` mentioning one of its terms."""
    text = rng.choice(SENTENCES).format(
        subject=subject.name, term=term or rng.choice(subject.terms)
    )
    return text[0].upper() + text[1:]


def sentences(rng: random.Random, subject: Subject, n: int) -> list[str]:
    """``n`` distinct sentences about ``subject``, every term of it used at least once when
    ``n`` allows."""
    terms = [*subject.terms] + [
        rng.choice(subject.terms) for _ in range(max(0, n - len(subject.terms)))
    ]
    rng.shuffle(terms)
    out: list[str] = []
    for term in terms[:n]:
        for _ in range(20):
            s = sentence(rng, subject, term)
            if s not in out:
                break
        out.append(s)
    return out
