"""`models`: a carrier's or maker's model is named by what they make, as the released
captions do ("airline goes airliner", for "Emirates goes all A380"): a model code (digits
with a few letters or a series: "747", "A380", "737-800", "F40", "777-300ER") after a name
of `MAKER_CLASSES` becomes its class with the names before it: "A Lufthansa 747 landing at
Frankfurt" -> "an airliner landing", "a Ferrari F40 parked on the street" -> "a car parked
on the street" [PRODUCT]; where it modifies a noun it goes, as other names do
(`name_modifiers`: "a Boeing 747 cockpit" -> "a cockpit"). The small model reads an "-ing"
word after a model as a noun it modifies ("landing"); that is its verb. A model code
nothing in the list makes stays a number (`numbers` drops its count: "A 747 landing at
sunset" -> "a landing at sunset"), and a number spaCy labelled a name is none (a name
needs a word).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from conceptual.text.hypernymize.registry import Rule
from conceptual.text.hypernymize.tokens import MEASURE_LABELS, NOUN_MODIFIER_DEPS, TIME_LABELS

MODELS = Rule(
    "models",
    "replaces a carrier's or maker's model by what they make (airliner, car, camera)",
    example=("A red Ferrari F40 parked on the street", "a red car parked on the street"),
    labels=("PRODUCT",),
)

# Model codes, digits with a few letters around them or a series after a hyphen ("747",
# "A380", "F40", "Su-27", "2CV", "777-300ER" in three tokens); not ordinals or years.
MODEL_CODE = re.compile(r"[A-Za-z]{0,3}-?\d{1,4}[A-Za-z]{0,4}")
NOT_MODEL_CODE = re.compile(r"\d+(?:st|nd|rd|th)|(?:1[89]|20)\d\d|(?:1[89]|20)?\d0s", re.I)
PLURAL_MODEL_CODE = re.compile(r"\d+s")  # "two Delta 747s"
MAX_MAKER_WORDS = 3
# ... and who makes or flies them, by lowercase name: the class noun their models are.
# Carriers fly airliners, and Airbus and Embraer make them; the other aircraft makers make
# fighters and bombers as well ("Boeing B-17"). Names that are mostly something else before
# a number are left out ("seat 12", "lot 5", "an American 10 year old").
MAKER_CLASSES = {
    **dict.fromkeys(
        "aer lingus,aeroflot,air canada,air china,air france,air india,air new zealand,airbus,"
        "alaska airlines,alitalia,american airlines,austrian airlines,avianca,british"
        " airways,cathay pacific,china airlines,china eastern,china southern,delta,delta"
        " air lines,easyjet,el al,embraer,emirates,etihad,eva air,finnair,iberia,japan airlines,"
        "jal,jetblue,klm,korean air,lufthansa,malaysia airlines,pan am,qantas,qatar airways,"
        "ryanair,singapore airlines,southwest,thai airways,turkish airlines,twa,united"
        " airlines,us airways,virgin atlantic,westjet,wizz air".split(","),
        "airliner",
    ),
    **dict.fromkeys(
        "antonov,avro,beechcraft,boeing,bombardier,cessna,de havilland,"
        "dassault,douglas,eurofighter,fokker,grumman,ilyushin,junkers,lockheed,"
        "lockheed martin,mcdonnell douglas,messerschmitt,mig,mikoyan,northrop,piper,"
        "sikorsky,sukhoi,supermarine,tupolev".split(","),
        "aircraft",
    ),
    **dict.fromkeys(
        "alfa romeo,aston martin,audi,bentley,bmw,bugatti,buick,cadillac,chevrolet,chevy,"
        "chrysler,citroen,citroën,datsun,dodge,ferrari,fiat,ford,holden,honda,hyundai,jaguar,"
        "jeep,kia,lada,lamborghini,lancia,land rover,lexus,lotus,maserati,mazda,mclaren,"
        "mercedes,mercedes-benz,mitsubishi,nissan,oldsmobile,opel,peugeot,pontiac,porsche,"
        "renault,rolls-royce,saab,skoda,subaru,suzuki,tesla,toyota,trabant,vauxhall,"
        "volkswagen,volvo,vw".split(","),
        "car",
    ),
    **dict.fromkeys(
        "aprilia,bmw motorrad,bsa,ducati,harley-davidson,husqvarna,kawasaki,ktm,moto guzzi,"
        "mv agusta,royal enfield,yamaha".split(","),
        "motorcycle",
    ),
    **dict.fromkeys("canon,hasselblad,leica,nikon,olympus,pentax,rolleiflex".split(","), "camera"),
    **dict.fromkeys("iphone,motorola,nokia".split(","), "phone"),
}


@MODELS.step
def replace_models(doc, edits, know):
    """A carrier's or maker's model becomes what they make, the names before its code
    included ("a Lufthansa Boeing 747-400" -> "an airliner"), or goes where it modifies a
    noun ("a Boeing 747 cockpit" -> "a cockpit") [PRODUCT]."""
    for span, kind in models(doc):
        if edits.touches(span):
            continue
        root, head = span.root, span.root.head
        modifies = (
            head.i >= span.end
            and head.pos_ == "NOUN"
            and root.dep_ in NOUN_MODIFIER_DEPS
            and not know.is_participle(head)
        )
        if modifies:
            edits.remove(span, "PRODUCT", span.text)
        else:
            plural = PLURAL_MODEL_CODE.fullmatch(span[-1].text)
            word = know.lexicon.plural(kind) if plural else kind
            edits.replace(span, word, kind, "PRODUCT", "rule")


def models(doc) -> Iterator[tuple]:
    """(span, class) for the models named in the doc: the names of `MAKER_CLASSES` right
    before a model code and the code, which may run on ("737-800", "911 GT3"); the
    first name says what the model is (a carrier's Boeing is an airliner)."""
    end = 0
    for token in doc:
        if token.i < end or not is_model_code(token):
            continue
        start, kind = token.i, None
        while maker := maker_before(doc, start):
            start, kind = maker
        end = token.i + 1
        while end < len(doc):
            hyphen = doc[end].text == "-" and not doc[end - 1].whitespace_
            if is_model_code(doc[end]):
                end += 1
            elif hyphen and end + 1 < len(doc) and not doc[end].whitespace_:
                if not is_model_code(doc[end + 1]):
                    break
                end += 2
            else:
                break
        if kind is not None:
            yield doc[start:end], kind


def is_model_code(token) -> bool:
    """Whether a token can be a model's code (rule 14: "747", "A380", "F40", "Su-27"): a
    few digits with a few letters, no ordinal, year or decade, nor part of a date, time or
    measure spaCy found."""
    return (
        MODEL_CODE.fullmatch(token.text) is not None
        and NOT_MODEL_CODE.fullmatch(token.text) is None
        and token.ent_type_ not in TIME_LABELS | MEASURE_LABELS
    )


def maker_before(doc, end: int) -> tuple[int, str] | None:
    """(start, class) of a name of `MAKER_CLASSES` ending right before token `end` ("Delta
    Air Lines", "Mercedes-Benz", "delta"), the longest; None if none ends there."""
    for size in range(min(MAX_MAKER_WORDS, end), 0, -1):
        words = doc[end - size : end]
        if kind := MAKER_CLASSES.get(words.text.lower()):
            return words.start, kind
    return None
