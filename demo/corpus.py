"""A deterministic, realistic set of web alt-text candidates, for `make demo` and benchmarks.

A web crawl of `<img alt="...">` texts is mostly noise around a core of good captions. The
generator mixes both in fixed shares (KIND_SHARES) so that every filter of the curation
pipeline has something to reject and a sensible share survives:

- "descriptive" and "named_entities" (55.5%): well-formed English captions in the style of
  stock photos and news pictures, built from templates and word lists (the templates and
  the famous people are data/templates.json and data/people.json). The word lists are
  ordered most common first and drawn with a bias to the front (pick_common), so concepts
  recur as they do on the web (person, dog, beach, park...), which the entity-type
  frequency rule needs; named entities (people WordNet knows and people it does not,
  cities, landmarks, organizations, dates, durations, counts, units, nationalities) give
  the hypernymization step its work.
- junk of every sort a crawl holds, each kind a few percent: boilerplate, placeholders,
  hashtags, handles, URLs, file names, keyword lists, other languages, emoji, empty and
  enormous texts, bad capitalization, profanity, extreme sentiment, HTML, control
  characters, repetition, fragments and tokens outside any vocabulary.

Each row carries the `kind` the generator meant it to be. The pipeline never reads it; it
lets tests and the demo show intent. Everything is drawn from one random.Random(seed), so
the same (n, seed) gives the same rows on every machine.
"""

from __future__ import annotations

import base64
import bisect
import datetime
import json
import math
import os
import random
import re
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

DATA = Path(__file__).parent / "data"  # word lists kept as data
# The "{slot}" templates (SLOTS fills them), by the kind or the caption part they write.
TEMPLATES: dict[str, list[str]] = json.loads((DATA / "templates.json").read_text("utf-8"))

# Percent of the rows each kind gets (the counts are apportioned exactly, then shuffled).
KIND_SHARES: dict[str, float] = {
    "descriptive": 36.0,
    "named_entities": 19.5,
    "boilerplate_wrapped": 4.0,  # a good caption inside croppable "Stock Photo - ..." text
    "boilerplate_pattern": 1.5,  # "embedded image permalink", "profile photo": dropped
    "placeholder": 3.0,  # "image", "logo", "Untitled": the commonest alt-texts on the web
    "hashtags": 2.0,
    "handle": 1.5,
    "url": 1.5,
    "file_name": 3.0,
    "keyword_list": 2.5,
    "non_english": 4.0,
    "emoji": 1.5,
    "empty": 4.0,
    "huge": 0.5,
    "all_caps": 1.5,
    "title_case": 1.5,
    "lowercase_start": 2.0,
    "profanity": 1.0,
    "sentiment": 1.5,
    "html": 1.5,
    "control_chars": 1.0,
    "repetition": 1.0,
    "fragment": 3.0,
    "out_of_vocabulary": 1.5,
}

HUGE_MIN_CHARS = 3_000
HUGE_MAX_CHARS = 200_000
DUPLICATE_IMAGE_SHARE = 0.01  # rows that reuse an earlier image URL with their own alt-text
SAME_PAGE_SHARE = 0.25  # rows whose image sits on the same page as the previous row's

FORMATS = ("tsv", "cc_tsv", "jsonl", "parquet")

# The word lists below are packed by hand, several to a line; ruff format leaves them so.
# fmt: off

# ---------------------------------------------------------------------------------------
# Descriptive captions. Scenes are grouped by where an action can happen, so that nobody
# swims in the kitchen. Every scene has a determiner and a preposition.

OUTDOOR_SCENES = (
    "on the beach", "in the park", "on a city street", "in a park", "along the beach",
    "in the street", "in the city", "in the garden", "by the lake", "in the old town",
    "in a field", "in the forest", "near the river", "in the snow", "on a mountain trail",
    "in a field of flowers", "in the woods", "on top of a mountain", "along the river",
    "on the bridge", "on the lawn", "in the countryside", "on a country road",
    "in the town square", "at the harbor", "on the pier", "in the desert", "at the playground",
    "on the sidewalk", "in front of a church",
)
INDOOR_SCENES = (
    "in the kitchen", "in the living room", "in a cafe", "in a restaurant", "at the office",
    "in the classroom", "in the library", "in the bedroom", "at a coffee shop", "in the studio",
    "at the museum", "in a hotel room",
)
ANY_SCENES = OUTDOOR_SCENES[:10] + INDOOR_SCENES[:6] + OUTDOOR_SCENES[10:] + INDOOR_SCENES[6:]
WATER_SCENES = (
    "in the sea", "in the lake", "in the ocean", "in a swimming pool", "in the river",
    "in the waves",
)
TRANSIT_SCENES = ("at the train station", "at the bus stop", "on the platform", "at the airport")
BEACH_SCENES = ("on the beach", "on a sandy beach", "along the shore")
WATERSIDE_SCENES = ("by the lake", "on the river bank", "at the harbor", "on the pier")
GARDEN_SCENES = ("in the garden", "in the backyard", "on a farm", "in a greenhouse")
MARKET_SCENES = ("at the market", "at a farmers market", "in a supermarket", "at a street market")
SNOW_SCENES = ("in the snow", "in the mountains", "on a snowy hill", "on the ski run")
FIELD_SCENES = ("in a field", "in the meadow", "on a farm", "on the hillside", "in the pasture")
POND_SCENES = ("on the lake", "in the pond", "on the river", "in the canal")
SKY_SCENES = ("over the sea", "over the lake", "above the city", "in the blue sky")
PERCH_SCENES = ("on a branch", "on the fence", "on the roof", "on a rock", "on a lamp post")
PARK_SCENES = ("in the park", "in the garden", "in the forest", "on the lawn", "in the woods")

# Appended to scenes outdoors only: "at sunset in the library" reads wrong.
TIMES_OF_DAY = (
    "at sunset", "in the morning", "at night", "on a sunny day", "in winter", "in summer",
    "at sunrise", "in the evening", "on a windy day", "in autumn", "in spring", "after the rain",
    "on a cold winter day", "at dusk", "on a foggy morning", "under a blue sky",
)

ADULTS = (
    "woman", "man", "couple", "family", "tourist", "person", "businessman", "student", "chef",
    "mother", "father", "photographer", "worker", "teacher", "doctor", "musician",
    "businesswoman", "farmer", "cyclist", "runner", "hiker", "artist", "nurse", "fisherman",
    "soldier", "police officer", "dancer", "grandmother", "grandfather",
)
CHILDREN = ("girl", "boy", "child", "kid", "teenager")
ADULT_ADJECTIVES = ("young", "old", "elderly", "senior", "middle-aged", "tired", "smiling")
CHILD_ADJECTIVES = ("little", "young", "small", "smiling")
# Word numbers only: a caption that starts with "3" has no capitalized first word.
PEOPLE_COUNTS = ("two", "three", "four", "five", "several", "a few", "a group of", "a couple of")
ANIMAL_COUNTS = ("two", "three", "four", "five", "several")
# Complements that only a group can do: "A child stands together" reads wrong.
GROUP_COMPLEMENTS = frozenset(("together", "hand in hand"))

# (verb, what may follow it, where it happens). Verbs are in the base form; inflect() makes
# "walks" and "walking".
PEOPLE_ACTIONS = (
    ("walk", ("", "a dog", "together", "hand in hand"), OUTDOOR_SCENES),
    ("sit", ("", "together", "with a cup of coffee"), ANY_SCENES),
    ("play", ("with a ball", "with a kite", "football", "frisbee", "with a dog"), OUTDOOR_SCENES),
    ("stand", ("", "together"), ANY_SCENES),
    ("run", ("", "with a dog"), OUTDOOR_SCENES),
    ("ride", ("a bicycle", "a bike", "a horse", "a skateboard", "a scooter"), OUTDOOR_SCENES),
    ("take", ("a photo", "a picture", "a selfie", "a break"), ANY_SCENES),
    ("look", ("at the view", "at the sea", "at the mountains", "at the sky"), OUTDOOR_SCENES),
    ("read", ("a book", "a newspaper", "a map", "a magazine"), ANY_SCENES),
    ("hold", ("an umbrella", "a cup of coffee", "a bouquet of flowers", "a sign", "a camera"),
     ANY_SCENES),
    ("eat", ("pizza", "ice cream", "an apple", "lunch", "breakfast", "a sandwich"), ANY_SCENES),
    ("drink", ("coffee", "tea", "a cup of coffee", "a glass of water", "juice"), ANY_SCENES),
    ("play", ("the guitar", "chess", "cards"), ANY_SCENES),
    ("look", ("at a map", "at the camera", "at a smartphone"), ANY_SCENES),
    ("carry", ("a bag", "a backpack", "a surfboard", "a basket of apples", "a box"),
     OUTDOOR_SCENES),
    ("work", ("on a laptop", "at a desk", "on a project"), INDOOR_SCENES),
    ("talk", ("on the phone", "to a friend", "with a customer"), ANY_SCENES),
    ("cook", ("dinner", "pasta", "breakfast", "a meal", "soup"), INDOOR_SCENES),
    ("swim", ("",), WATER_SCENES),
    ("surf", ("",), WATER_SCENES),
    ("dance", ("", "together"), ANY_SCENES),
    ("wait", ("for a bus", "for a train", "for a taxi", "in line"), TRANSIT_SCENES),
    ("smile", ("", "at the camera"), ANY_SCENES),
    ("jump", ("", "over a puddle", "for joy"), OUTDOOR_SCENES),
    ("paint", ("a picture", "a wall", "a portrait", "a fence"), ANY_SCENES),
    ("climb", ("a tree", "a rock", "the stairs", "a ladder"), OUTDOOR_SCENES),
    ("feed", ("the ducks", "a horse", "the birds", "the pigeons", "a goat"), OUTDOOR_SCENES),
    ("hug", ("a dog", "a friend", "a teddy bear"), ANY_SCENES),
    ("watch", ("the sunset", "the waves", "the boats"), OUTDOOR_SCENES),
    ("watch", ("a movie", "television", "the game"), INDOOR_SCENES),
    ("build", ("a sandcastle",), BEACH_SCENES),
    ("fish", ("", "from a boat", "off the pier"), WATERSIDE_SCENES),
    ("plant", ("a tree", "flowers", "vegetables"), GARDEN_SCENES),
    ("shop", ("for groceries", "for clothes", "for fruit"), MARKET_SCENES),
    ("repair", ("a bicycle", "a car", "the roof", "a fence"), OUTDOOR_SCENES),
    ("ski", ("",), SNOW_SCENES),
    ("pose", ("for a photo", "for the camera"), ANY_SCENES),
    ("laugh", ("", "together"), ANY_SCENES),
)

# (animals, their adjectives, their actions), pets first: the web photographs its dogs.
ANIMAL_GROUPS = (
    (
        ("dog", "cat", "puppy", "kitten"),
        ("black", "white", "brown", "little", "big", "fluffy", "young", "old"),
        (
            ("run", ("", "after a ball"), OUTDOOR_SCENES),
            ("sleep", ("",), ANY_SCENES),
            ("play", ("with a ball", "with a stick", "with a toy"), ANY_SCENES),
            ("sit", ("",), ANY_SCENES),
            ("look", ("at the camera",), ANY_SCENES),
            ("catch", ("a frisbee", "a ball"), OUTDOOR_SCENES),
            ("lie", ("",), ANY_SCENES),
            ("swim", ("",), WATER_SCENES),
            ("carry", ("a stick", "a ball"), OUTDOOR_SCENES),
        ),
    ),
    (
        ("horse", "cow", "sheep", "goat"),
        ("brown", "white", "black", "young", "old"),
        (
            ("graze", ("",), FIELD_SCENES),
            ("stand", ("",), FIELD_SCENES),
            ("eat", ("grass", "hay"), FIELD_SCENES),
            ("run", ("",), FIELD_SCENES),
            ("look", ("at the camera",), FIELD_SCENES),
        ),
    ),
    (
        ("bird", "duck", "swan", "seagull", "pigeon"),
        ("white", "black", "young", "wild"),
        (
            ("sit", ("",), PERCH_SCENES),
            ("fly", ("",), SKY_SCENES),
            ("swim", ("",), POND_SCENES),
            ("eat", ("bread", "seeds"), PARK_SCENES),
        ),
    ),
    (
        ("squirrel", "rabbit", "deer", "fox"),
        ("little", "young", "wild", "brown", "red"),
        (
            ("eat", ("a nut", "an acorn", "grass"), PARK_SCENES),
            ("sit", ("",), PARK_SCENES),
            ("run", ("",), PARK_SCENES),
            ("look", ("at the camera",), PARK_SCENES),
        ),
    ),
)

# Still lifes: (things, their adjectives, where they are).
THING_GROUPS = (
    (
        ("car", "bicycle", "motorcycle", "bus", "truck", "scooter", "van", "tractor"),
        ("red", "old", "blue", "white", "vintage", "black", "yellow", "rusty", "classic"),
        ("parked on the street", "parked in front of a house", "on a country road",
         "in the parking lot", "in the rain", "under a layer of snow", "next to a wall",
         "in front of the garage"),
    ),
    (
        ("house", "church", "castle", "lighthouse", "cottage", "barn", "windmill", "cabin"),
        ("old", "small", "white", "historic", "stone", "wooden", "red", "abandoned"),
        ("on top of the hill", "by the sea", "at the edge of the lake", "in the old town",
         "in the middle of a field", "in a clearing surrounded by trees", "against a blue sky",
         "under a layer of snow", "near the river", "in the mountains"),
    ),
    (
        ("cup of coffee", "cake", "slice of pizza", "bowl of soup", "plate of pasta", "salad"),
        ("fresh", "homemade", "hot", "small", "large"),
        ("on the table", "on a wooden table", "on the kitchen counter", "on a tray", "at a cafe",
         "in a restaurant", "on a picnic blanket"),
    ),
    (
        ("guitar", "laptop", "umbrella", "pair of shoes", "stack of books", "clock", "lamp"),
        ("old", "vintage", "wooden", "new", "small", "red", "antique", "black"),
        ("on the table", "on a wooden floor", "in the window", "on the shelf", "on the desk",
         "next to the window", "in the corner of the room", "on a white background"),
    ),
    (
        ("boat", "sailboat", "fishing boat", "yacht", "canoe"),
        ("small", "old", "white", "wooden", "red", "blue"),
        ("in the harbor", "on the lake", "on the beach", "at the pier", "on the river",
         "on the open sea"),
    ),
    (
        ("tree", "rose", "sunflower", "tulip", "daisy", "palm tree", "mushroom"),
        ("red", "yellow", "white", "tall", "old", "single", "wild"),
        ("in the garden", "in a vase", "in the middle of a field", "in the forest", "in the rain",
         "against a blue sky", "by the road", "on the hillside"),
    ),
)
THING_COUNTS = ("two", "three", "four", "several", "a dozen", "a few")

LANDSCAPES = (
    "the city", "the mountains", "the beach", "the lake", "the old town", "the river",
    "the valley", "a small village", "the harbor", "the forest", "the coast", "the city skyline",
    "the countryside", "a field of sunflowers", "the bay", "the rooftops", "a vineyard",
    "the desert", "the hills",
)
WATERS = ("the sea", "the ocean", "the lake", "the river", "the bay", "the harbor")
WATER_SHORES = ("the coast", "the shore", "the beach", "the cliffs")
VIEWPOINTS = (
    "the top of the hill", "the window", "the balcony", "the bridge", "a hotel room", "the tower",
    "the plane", "the summit", "the castle walls",
)
SMALL_CREATURES = ("a bee", "a butterfly", "a ladybug", "a dragonfly", "a snail", "raindrops")
SURFACES = ("a yellow flower", "a green leaf", "a red rose", "the window", "the grass")
EVENTS = ("a concert", "the festival", "a football match", "the parade", "a rally", "the market")

# ---------------------------------------------------------------------------------------
# Named entities. People are (name, role, nationality). The historical ones are WordNet 3.0
# instances (the pipeline replaces them by their hypernym: "physicist"); the living ones
# mostly are not (it falls back to the entity type: "person").

# Famous people by the slot that names them: (name, role, nationality) each.
PEOPLE: dict[str, list[list[str]]] = json.loads((DATA / "people.json").read_text("utf-8"))
PAINTERS = tuple(name for name, role, _ in PEOPLE["historical"] if role == "painter")
COMPOSERS = tuple(name for name, role, _ in PEOPLE["historical"] if role == "composer")
CITIES = (
    ("Paris", "France"), ("London", "England"), ("New York", "the United States"),
    ("Los Angeles", "California"), ("Tokyo", "Japan"), ("Sydney", "Australia"),
    ("Rome", "Italy"), ("Berlin", "Germany"), ("San Francisco", "California"),
    ("Barcelona", "Spain"), ("Chicago", "Illinois"), ("Amsterdam", "the Netherlands"),
    ("Venice", "Italy"), ("Kyoto", "Japan"), ("Madrid", "Spain"), ("Munich", "Germany"),
    ("Toronto", "Canada"), ("Moscow", "Russia"), ("Istanbul", "Turkey"),
    ("Washington", "the United States"), ("Rio de Janeiro", "Brazil"),
    ("Cape Town", "South Africa"),
)
FESTIVAL_CITIES = ("Cannes", "Venice", "Berlin", "Toronto", "Sundance")
LANDMARKS = (
    ("the Eiffel Tower", "Paris"), ("the Statue of Liberty", "New York"), ("Big Ben", "London"),
    ("the Golden Gate Bridge", "San Francisco"), ("the Colosseum", "Rome"),
    ("the Louvre", "Paris"), ("Central Park", "New York"), ("Tower Bridge", "London"),
    ("the Sydney Opera House", "Sydney"), ("Times Square", "New York"),
    ("Buckingham Palace", "London"), ("the Brandenburg Gate", "Berlin"),
    ("the Sagrada Familia", "Barcelona"), ("Mount Fuji", "Japan"), ("the Kremlin", "Moscow"),
    ("the Hollywood sign", "Los Angeles"),
)
COMPANIES = ("Google", "Microsoft", "Apple", "Toyota", "the BBC", "Samsung")
INSTITUTIONS = ("the United Nations", "the European Union", "UNESCO", "the Red Cross", "NATO")
AWARD_EVENTS = (
    "the Academy Awards", "the Golden Globe Awards", "the Met Gala", "the Grammy Awards",
    "the BAFTA Awards", "the premiere of the film", "a charity gala",
)
TOURNAMENTS = ("Wimbledon", "the Australian Open", "the World Cup", "the Olympic Games")
UNIVERSITIES = ("Harvard University", "the University of Oxford", "Stanford University", "MIT")
HOLIDAYS = (
    "Bastille Day", "New Year's Eve", "Christmas Eve", "Independence Day", "Halloween",
    "Chinese New Year", "Thanksgiving Day",
)
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
SEASONS = ("summer", "winter", "spring", "autumn")
NATIONALITIES = (
    "Italian", "French", "Japanese", "Chinese", "Mexican", "Indian", "Greek", "Spanish",
    "German", "American", "British", "Brazilian", "Thai", "Turkish",
)
NATIONAL_DISHES = (
    "Italian cuisine", "Italian pasta", "Japanese sushi", "Mexican tacos", "Indian curry",
    "Thai noodles", "Greek salad", "French pastries", "Spanish paella", "Turkish coffee",
    "Chinese dumplings", "German sausages",
)
NATIONAL_TRADITIONS = (
    "Japanese garden", "Chinese lantern festival", "Indian wedding", "German beer festival",
    "Italian restaurant", "French bakery", "Moroccan market", "Mexican street food stall",
    "Brazilian carnival parade", "Scottish bagpipe band",
)
DURATIONS = ("two-hour", "three-day", "10-minute", "week-long", "12-hour", "two-week", "five-day")
DISTANCES = ("5 km", "10 km", "21 km", "42 km", "3-mile", "100-meter", "50 km")
NAMED_PEOPLE_COUNTS = ("Hundreds of", "Thousands of", "Dozens of", "Two", "Three", "A group of")
NAMED_PEOPLE_NOUNS = ("tourists", "people", "fans", "visitors", "students", "children")

# ---------------------------------------------------------------------------------------
# Junk.

BOILERPLATE_PREFIXES = (
    "Stock Photo - ", "Stock photo: ", "Stock Image: ", "Royalty Free Stock Photo: ",
    "Stock Photography - ", "Click to enlarge picture ", "Photo: ", "Image: ",
)
BOILERPLATE_SUFFIXES = (
    " - Stock Image", " - stock photo", " stock photo", " - Stock Photo",
    " - Royalty Free Stock Photo", " | Stock Photo", " - stock image",
    ". Click to enlarge picture", " (click to enlarge)",
)
PLACEHOLDERS = (
    "image", "Image", "photo", "Photo", "logo", "Logo", "banner", "icon", "thumbnail",
    "Untitled", "untitled", "spacer", "Read more", "Click here", "Home", "Advertisement",
    "Loading...", "placeholder", "Featured image", "Product image", "Picture 1", "main image",
    "No photo description available.", "Image may contain: 1 person, smiling, outdoor",
    "Image may contain: sky, ocean, outdoor and nature", "Image may contain: food",
)
FIRST_NAMES = (
    "john", "anna", "maria", "david", "sarah", "mike", "emma", "chris", "laura", "alex",
    "sophie", "daniel", "julia", "tom", "nina", "kevin",
)
LAST_NAMES = (
    "smith", "miller", "garcia", "johnson", "brown", "rossi", "schmidt", "martin", "lee",
    "walker", "khan", "silva",
)
HANDLE_WORDS = ("travel", "photo", "food", "wander", "daily", "urban", "wild", "coffee", "lens")
HASHTAGS = (
    "#sunset", "#beach", "#travel", "#nofilter", "#instagood", "#photooftheday", "#love",
    "#summer", "#tbt", "#wanderlust", "#nature", "#picoftheday", "#weekend", "#friends",
    "#family", "#food", "#foodie", "#throwbackthursday", "#travelgram", "#blessed",
    "#dogsofinstagram", "#ootd", "#fashion", "#wedding", "#art", "#london", "#paris", "#nyc",
)
SOCIAL_PHRASES = (
    "Summer vibes", "Best day ever", "Weekend mood", "Love this place", "Good morning",
    "Throwback to last summer", "Sunday brunch", "Missing this view", "Home sweet home",
    "Date night", "Road trip", "Coffee time", "Girls night out", "Happy Friday",
    "Happy birthday!",
)
URL_SITES = ("example.com", "photostock.example", "travelblog.test", "shop.example.net")
KEYWORD_TOPICS = (
    ("wedding dress", "bridal gown", "white lace", "cheap wedding dresses", "buy online",
     "lace wedding dress", "plus size wedding dress", "beach wedding dress",
     "vintage bridal gown", "wedding dresses 2018"),
    ("sofa", "couch", "living room furniture", "modern sofa", "leather sofa", "sofa bed",
     "cheap sofas", "free delivery", "corner sofa"),
    ("hotel", "cheap hotels", "best hotel deals", "hotel booking", "luxury hotel",
     "hotel near airport", "book now", "last minute hotels"),
    ("running shoes", "sneakers", "mens running shoes", "womens sneakers", "trainers sale",
     "sports shoes", "best running shoes 2017"),
    ("short hairstyles", "hairstyles for women", "bob haircut", "hair ideas 2017",
     "easy hairstyles", "long hair", "hair color ideas"),
    ("kitchen design", "modern kitchen", "kitchen ideas", "kitchen cabinets", "white kitchen",
     "small kitchen design", "kitchen remodel"),
    ("phone case", "iphone case", "samsung galaxy case", "leather phone case",
     "cute phone cases", "phone accessories", "free shipping"),
    ("tattoo", "tattoo ideas", "small tattoos", "tattoo designs", "rose tattoo",
     "tattoos for women", "arm tattoo"),
)
KEYWORD_SEPARATORS = (", ", ", ", " | ", " - ", " ")
# (subjects, verbs, places) of one language each (data/latin_script_sentences.json: Spanish,
# French, German, Portuguese, Italian). Singular subjects only, so any combination agrees.
LATIN_SCRIPT_LANGUAGES = tuple(
    (tuple(words["subjects"]), tuple(words["verbs"]), tuple(words["places"]))
    for words in json.loads((DATA / "latin_script_sentences.json").read_text("utf-8")).values()
)
NON_ENGLISH_SENTENCES = (
    "Vista de la ciudad desde el mirador", "Receta de paella valenciana",
    "Vestido de novia con encaje blanco", "Vue sur la tour Eiffel depuis le Trocadéro",
    "Recette de la tarte aux pommes", "Blick auf die Altstadt von Heidelberg",
    "Hochzeit im Schloss im Sommer", "Vista do Cristo Redentor no Rio de Janeiro",
    "Ricetta della pizza napoletana fatta in casa", "Zonsondergang boven de zee bij Scheveningen",
    "İstanbul Boğazı'nda gün batımı", "Widok na Stare Miasto w Krakowie",
    "一个女人在海滩上散步", "日落时分的城市风景", "美丽的婚纱照", "一只可爱的小狗在草地上玩耍",
    "桜の木の下で写真を撮る女性", "東京の夜景", "京都の日本庭園", "海辺で遊ぶ子供たち",
    "Женщина гуляет с собакой в парке", "Вид на Москву ночью", "Красивый закат над морем",
    "امرأة تمشي على الشاطئ عند غروب الشمس", "منظر المدينة في الليل",
    "서울의 야경", "해변에서 산책하는 여자", "समुद्र तट पर सूर्यास्त",
    "Ηλιοβασίλεμα στη Σαντορίνη", "ทะเลสวยที่ภูเก็ต",
)
EMOJI = (
    "😍", "❤️", "🔥", "😂", "🙌", "✨", "🌊", "☀️", "🌴", "🐶", "🍕", "🎉", "💕", "👌", "📸", "🌅",
    "🏖️", "😎", "💯",
)
SHOUTED_ADS = (
    "SUMMER SALE - UP TO 50% OFF", "NEW ARRIVALS", "FREE SHIPPING ON ALL ORDERS",
    "LIMITED EDITION", "BUY NOW AND SAVE", "CLICK HERE TO WIN", "HOT DEALS OF THE WEEK",
)
HEADLINE_SMALL_WORDS = frozenset(
    ("a", "an", "the", "of", "in", "on", "at", "for", "and", "with", "to", "by", "from")
)
LOWERCASE_BRAND_CAPTIONS = (
    "iPhone 7 on a wooden table", "iPad mini in a leather case on the desk",
    "eBay listing for a vintage camera", "iMac on a white desk in the office",
    "iPhone X in the hand of a woman",
)
SENTIMENT_THINGS = (
    "dress", "hotel", "vacation", "wedding", "sunset", "restaurant", "pizza", "service",
    "weekend", "phone", "concert", "flight", "beach", "view", "day",
)
HTML_WORD_PAIRS = (
    ("Sunset", "sea"), ("Salt", "pepper"), ("Black", "white"), ("Rock", "roll"),
    ("Fish", "chips"), ("Bed", "breakfast"), ("Bride", "groom"),
)
# What copy and paste and broken encoders leave in a crawl: NUL, bell, vertical tab, form
# feed, escape, DEL, zero-width space, BOM, soft hyphen, line separator, CR LF, tab, LF.
CONTROL_CHARACTERS = (
    "\x00", "\x07", "\x0b", "\x0c", "\x1b", "\x7f", "\u200b", "\ufeff", "\u00ad", "\u2028",
    "\r\n", "\t", "\n",
)
FRAGMENT_MODIFIERS = (
    "Sunset", "Summer", "Winter", "Mountain", "City", "Wedding", "Business", "Abstract",
    "Vintage", "Fresh", "Modern", "Tropical", "Autumn", "Night", "Beach", "Family", "Spring",
    "Rustic", "Red", "Green",
)
FRAGMENT_HEADS = (
    "beach", "landscape", "cake", "meeting", "background", "skyline", "flowers", "dress",
    "kitchen", "house", "forest", "road", "party", "portrait", "texture", "sky", "garden",
    "lake", "interior", "fruit", "breakfast",
)
SINGLE_WORD_FRAGMENTS = ("Sunset", "Dog", "Beach", "Flowers", "Mountains", "Wedding", "Food")
REPEATED_WORDS = ("love", "sale", "beach", "wow", "cute", "yes", "free")
PRODUCT_BRANDS = (
    ("Nike Air Max", "270"), ("Adidas Ultraboost", "19"), ("Samsung Galaxy", "S9"),
    ("Canon EOS", "80D"), ("Sony Alpha", "A7III"),
)
PRODUCT_COLORS = ("Black/White", "Navy", "Grey", "Core Black", "Red")
LOREM_IPSUM = (
    "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt "
    "ut labore et dolore magna aliqua"
).split()
KEYBOARD_GIBBERISH = ("asdfgh", "qwertyuiop", "xcvbnm", "asdf jkl", "zxcvb", "hjkl", "qwerty")
LETTERS = "abcdefghijklmnopqrstuvwxyz"

# ---------------------------------------------------------------------------------------
# Where the images live: made-up sites on reserved names (.example, .test, example.com).
# (page host, image host, image path, page path).

SITES = (
    ("www.photostock.example", "cdn.photostock.example",
     "/photos/{year}/{month}/{slug}-{photo_id}{ext}", "/photo/{slug}-{photo_id}.html"),
    ("news.example.com", "static.news.example.com",
     "/media/{year}/{month}/{day}/{photo_id}_{slug}{ext}?w=1200&q=80",
     "/{section}/{year}/{month}/{day}/{slug}"),
    ("www.travelblog.test", "www.travelblog.test",
     "/wp-content/uploads/{year}/{month}/{slug}-{photo_id}-1024x683{ext}",
     "/{year}/{month}/{slug}/"),
    ("shop.example.net", "images.shop.example.net",
     "/products/{photo_id}/{slug}_large{ext}?v={timestamp}",
     "/collections/{section}/products/{slug}"),
    ("social.example", "media.social.example",
     "/media/{photo_id}{ext}?name=large", "/{handle}/status/{timestamp}{day}"),
    ("www.recipes.example.org", "images.example-cdn.test",
     "/recipes/{year}/{month}/{slug}-{photo_id}{ext}", "/recipe/{slug}-{photo_id}"),
    ("forum.example", "forum.example",
     "/attachments/{photo_id}/{slug}{ext}", "/threads/{slug}.{timestamp}/page-{day}"),
)
# File extensions as a crawl sees them (the image filter goes by the bytes, not the name).
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".JPG", ".png", ".webp")
IMAGE_EXTENSION_WEIGHTS = (80, 6, 6, 6, 2)
PAGE_SECTIONS = ("world", "travel", "entertainment", "sport", "culture", "home", "style", "food")

# ---------------------------------------------------------------------------------------
# Small grammar helpers.

IRREGULAR_PLURALS = {
    "man": "men", "woman": "women", "child": "children", "person": "people", "sheep": "sheep",
    "deer": "deer", "businessman": "businessmen",
    "businesswoman": "businesswomen", "fisherman": "fishermen",
}
DOUBLED_FINAL_CONSONANT = frozenset(("run", "sit", "swim", "shop", "hug"))

# fmt: on


def pick_common(rng: random.Random, items):
    """One of items, which are ordered most common first: squaring a uniform draw favours
    the front (the first of 30 items comes up 18% of the time, the last under 2%), as word
    frequencies do, so that common concepts recur often enough to survive the entity-type
    frequency rule."""
    return items[int(len(items) * rng.random() ** 2)]


def with_article(phrase: str) -> str:
    """'a dog', 'an old man', 'a university' (vowel letter, but not a vowel sound)."""
    first = phrase.split(" ", 1)[0].lower()
    vowel_sound = first[0] in "aeiou" and not first.startswith(("uni", "use", "one", "eu"))
    return ("an " if vowel_sound else "a ") + phrase


def plural(noun: str) -> str:
    """'dogs', 'women', 'cups of coffee', 'police officers'."""
    if " of " in noun:
        head, rest = noun.split(" of ", 1)
        return f"{plural(head)} of {rest}"
    before, _, last = noun.rpartition(" ")
    if last in IRREGULAR_PLURALS:
        last = IRREGULAR_PLURALS[last]
    elif last.endswith("y") and last[-2] not in "aeiou":
        last = last[:-1] + "ies"
    elif last.endswith(("s", "sh", "ch", "x", "z")):
        last += "es"
    else:
        last += "s"
    return f"{before} {last}" if before else last


def inflect(verb: str, form: str) -> str:
    """The 'third' person singular ('walks') or the 'participle' ('walking') of a base verb."""
    if form == "third":
        if verb.endswith(("s", "sh", "ch", "x", "o")):
            return verb + "es"
        if verb.endswith("y") and verb[-2] not in "aeiou":
            return verb[:-1] + "ies"
        return verb + "s"
    if verb.endswith("ie"):
        return verb[:-2] + "ying"
    if verb.endswith("e") and not verb.endswith("ee"):
        return verb[:-1] + "ing"
    if verb in DOUBLED_FINAL_CONSONANT:
        return verb + verb[-1] + "ing"
    return verb + "ing"


def capitalize_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def join_words(*parts: str) -> str:
    return " ".join(p for p in parts if p)


# ---------------------------------------------------------------------------------------
# Good captions.


def descriptive(rng: random.Random) -> str:
    """A stock-photo style caption with no proper names: a person or an animal doing
    something somewhere, a still life, or a view. Always a determiner and a preposition."""
    scene = (_person_scene, _animal_scene, _still_life, _view)[_branch(rng, 0.55, 0.70, 0.88)]
    return scene(rng)


def _person_scene(rng: random.Random) -> str:
    if rng.random() < 0.8:
        nouns, adjectives = ADULTS, ADULT_ADJECTIVES
    else:
        nouns, adjectives = CHILDREN, CHILD_ADJECTIVES
    noun = pick_common(rng, nouns)
    adjective = rng.choice(adjectives) if rng.random() < 0.4 else ""
    if rng.random() < 0.7:
        subject, is_plural = with_article(join_words(adjective, noun)), False
    else:
        subject, is_plural = join_words(rng.choice(PEOPLE_COUNTS), adjective, plural(noun)), True
    return _action_sentence(rng, subject, is_plural, pick_common(rng, PEOPLE_ACTIONS))


def _animal_scene(rng: random.Random) -> str:
    animals, adjectives, actions = pick_common(rng, ANIMAL_GROUPS)
    animal = pick_common(rng, animals)
    adjective = rng.choice(adjectives) if rng.random() < 0.5 else ""
    if rng.random() < 0.75:
        subject, is_plural = with_article(join_words(adjective, animal)), False
    else:
        subject = join_words(rng.choice(ANIMAL_COUNTS), adjective, plural(animal))
        is_plural = True
    return _action_sentence(rng, subject, is_plural, pick_common(rng, actions))


def _action_sentence(rng: random.Random, subject: str, is_plural: bool, action) -> str:
    verb, complements, scenes = action
    # Stock captions often drop the auxiliary: "Two children playing with a kite".
    if rng.random() < 0.35:
        verb = inflect(verb, "participle")
    elif not is_plural:
        verb = inflect(verb, "third")
    complement = rng.choice(complements)
    if complement in GROUP_COMPLEMENTS and not is_plural:
        complement = ""
    scene = pick_common(rng, scenes)
    time = rng.choice(TIMES_OF_DAY) if scene not in INDOOR_SCENES and rng.random() < 0.3 else ""
    return capitalize_first(join_words(subject, verb, complement, scene, time))


def _still_life(rng: random.Random) -> str:
    things, adjectives, places = pick_common(rng, THING_GROUPS)
    thing = pick_common(rng, things)
    adjective = rng.choice(adjectives) if " of " not in thing and rng.random() < 0.5 else ""
    if rng.random() < 0.8:
        subject = with_article(join_words(adjective, thing))
    else:
        subject = join_words(rng.choice(THING_COUNTS), adjective, plural(thing))
    time = rng.choice(TIMES_OF_DAY) if rng.random() < 0.2 else ""
    return capitalize_first(join_words(subject, rng.choice(places), time))


def _view(rng: random.Random) -> str:
    return fill(rng.choice(TEMPLATES["view"]), rng)


def named_entities(rng: random.Random) -> str:
    """A news or travel caption full of names, places, dates, counts and units."""
    return capitalize_first(fill(rng.choice(TEMPLATES["named_entities"]), rng))


def caption(rng: random.Random) -> str:
    """A good caption of either sort, the raw material of most junk kinds."""
    return descriptive(rng) if rng.random() < 0.65 else named_entities(rng)


def _person(rng: random.Random, people) -> str:
    name, role, nationality = rng.choice(people)
    return (f"{role} {name}", f"{nationality} {role} {name}", name)[_branch(rng, 0.45, 0.65)]


def _date(rng: random.Random) -> str:
    return f"{rng.choice(MONTHS)} {rng.randint(1, 28)}, {_year(rng)}"


def _year(rng: random.Random) -> str:
    return str(rng.randint(1990, 2018))


def _when(rng: random.Random) -> str:
    """A date phrase: 'on July 4, 2015', 'in 2019', 'during the summer of 1998'..."""
    return rng.choice(
        (
            lambda: f"on {_date(rng)}",
            lambda: f"in {_year(rng)}",
            lambda: f"during the {rng.choice(SEASONS)} of {_year(rng)}",
            lambda: f"in {rng.choice(MONTHS)} {_year(rng)}",
            lambda: f"on {rng.choice(WEEKDAYS)}",
            lambda: f"on {rng.choice(HOLIDAYS)} {_year(rng)}",
        )
    )()


def _moment(rng: random.Random) -> datetime.datetime:
    """A moment between 2010 and 2018, when the photo was taken."""
    return datetime.datetime(2010, 1, 1) + datetime.timedelta(
        seconds=rng.randrange(9 * 365 * 86400)
    )


def _landmark(rng: random.Random) -> str:
    landmark, place = rng.choice(LANDMARKS)
    return f"{landmark} in {place}"


def _handle(rng: random.Random) -> str:
    return rng.choice(
        (
            lambda: f"{rng.choice(FIRST_NAMES)}_{rng.choice(LAST_NAMES)}",
            lambda: f"{rng.choice(FIRST_NAMES)}{rng.choice(LAST_NAMES)}{rng.randint(1, 99)}",
            lambda: f"{rng.choice(HANDLE_WORDS)}_{rng.choice(HANDLE_WORDS)}",
        )
    )()


def _full_name(rng: random.Random) -> str:
    return f"{rng.choice(FIRST_NAMES).title()} {rng.choice(LAST_NAMES).title()}"


# What each "{slot}" of a template becomes. Every slot is drawn afresh, so
# "{celebrity} and {celebrity}" names two people.
SLOTS: dict[str, Callable[[random.Random], str]] = {
    "landscape": lambda rng: pick_common(rng, LANDSCAPES),
    "viewpoint": lambda rng: rng.choice(VIEWPOINTS),
    "time": lambda rng: rng.choice(TIMES_OF_DAY),
    "water": lambda rng: rng.choice(WATERS),
    "water_shore": lambda rng: rng.choice(WATER_SHORES),
    "creature": lambda rng: rng.choice(SMALL_CREATURES),
    "surface": lambda rng: rng.choice(SURFACES),
    "event": lambda rng: rng.choice(EVENTS),
    "celebrity": lambda rng: _person(rng, PEOPLE["celebrity"]),
    "athlete": lambda rng: _person(rng, PEOPLE["athlete"]),
    "politician": lambda rng: _person(rng, PEOPLE["politician"]),
    "historical": lambda rng: _person(rng, PEOPLE["historical"]),
    "painter": lambda rng: rng.choice(PAINTERS),
    "composer": lambda rng: rng.choice(COMPOSERS),
    "city": lambda rng: pick_common(rng, CITIES)[0],
    "other_city": lambda rng: rng.choice(CITIES)[0],
    "city_country": lambda rng: ", ".join(rng.choice(CITIES)),
    "festival_city": lambda rng: rng.choice(FESTIVAL_CITIES),
    "landmark": _landmark,
    "company": lambda rng: rng.choice(COMPANIES),
    "institution": lambda rng: rng.choice(INSTITUTIONS),
    "award_event": lambda rng: rng.choice(AWARD_EVENTS),
    "tournament": lambda rng: rng.choice(TOURNAMENTS),
    "university": lambda rng: rng.choice(UNIVERSITIES),
    "holiday": lambda rng: rng.choice(HOLIDAYS),
    "weekday": lambda rng: rng.choice(WEEKDAYS),
    "when": _when,
    "year": _year,
    "full_date": _date,
    "duration": lambda rng: rng.choice(DURATIONS),
    "distance": lambda rng: rng.choice(DISTANCES),
    "nationality": lambda rng: rng.choice(NATIONALITIES),
    "national_dish": lambda rng: rng.choice(NATIONAL_DISHES),
    "national_tradition": lambda rng: rng.choice(NATIONAL_TRADITIONS),
    "count": lambda rng: rng.choice(NAMED_PEOPLE_COUNTS),
    "people": lambda rng: rng.choice(NAMED_PEOPLE_NOUNS),
    "hours": lambda rng: str(rng.randint(2, 6)),
    # Junk slots.
    "caption": caption,
    "caption_lower": lambda rng: _lowercase_first(caption(rng)),
    "name": _full_name,
    "handle": _handle,
    "thing": lambda rng: rng.choice(SENTIMENT_THINGS),
    "site": lambda rng: rng.choice(URL_SITES),
    "slug": lambda rng: slug(caption(rng)),
    "code": lambda rng: "".join(rng.choices(LETTERS + LETTERS.upper() + "0123456789", k=7)),
    "number": lambda rng: str(rng.randint(100, 99999)),
    "month": lambda rng: f"{rng.randint(1, 12):02d}",
    "d3": lambda rng: f"{rng.randint(0, 999):03d}",
    "d4": lambda rng: f"{rng.randint(0, 9999):04d}",
    "d5": lambda rng: f"{rng.randint(0, 99999):05d}",
    "d7": lambda rng: f"{rng.randint(1000000, 1099999)}",
    "index": lambda rng: str(rng.randint(1, 12)),
    "camera_stamp": lambda rng: _moment(rng).strftime("%Y%m%d_%H%M%S"),
    "screenshot_stamp": lambda rng: _moment(rng).strftime("%Y-%m-%d at %I.%M.%S %p"),
    "slug_underscored": lambda rng: slug(descriptive(rng)).replace("-", "_"),
    "hex32": lambda rng: f"{rng.getrandbits(128):032x}",
}
SLOT = re.compile(r"\{(\w+)\}")


def _branch(rng: random.Random, *bounds: float) -> int:
    """Which branch one uniform draw takes: 0 below bounds[0], 1 below bounds[1], and so on,
    len(bounds) at or above the last (the bounds are cumulative shares)."""
    return bisect.bisect_right(bounds, rng.random())


def templated(kind: str) -> Callable[[random.Random], str]:
    """The generator of a kind that is one of its templates, filled."""
    return lambda rng: fill(rng.choice(TEMPLATES[kind]), rng)


def fill(template: str, rng: random.Random, fixed: dict[str, str] | None = None) -> str:
    """The template with each slot filled from SLOTS, or from `fixed` where it names it."""
    fixed = fixed or {}

    def value(match: re.Match) -> str:
        name = match.group(1)
        return fixed[name] if name in fixed else SLOTS[name](rng)

    return SLOT.sub(value, template)


def slug(text: str) -> str:
    """'a-young-woman-walks-a-dog': the first words of a text, as CMSs name their files."""
    words = re.findall(r"[a-z0-9]+", text[:120].lower())[:6]
    return "-".join(words) or "image"


def _lowercase_first(text: str) -> str:
    return text[:1].lower() + text[1:]


# ---------------------------------------------------------------------------------------
# Junk kinds, one function each.


def boilerplate_wrapped(rng: random.Random) -> str:
    text = caption(rng)
    wrapping = _branch(rng, 0.45, 0.9)  # a prefix, a suffix, or both
    prefix = rng.choice(BOILERPLATE_PREFIXES) if wrapping != 1 else ""
    return prefix + text + (rng.choice(BOILERPLATE_SUFFIXES) if wrapping != 0 else "")


def placeholder(rng: random.Random) -> str:
    return rng.choice(PLACEHOLDERS)


def hashtags(rng: random.Random) -> str:
    return _social_post(rng, " ".join(rng.sample(HASHTAGS, rng.randint(2, 8))), 0.4, 0.75)


def keyword_list(rng: random.Random) -> str:
    topic = rng.choice(KEYWORD_TOPICS)
    keywords = rng.sample(topic, rng.randint(4, len(topic)))
    text = rng.choice(KEYWORD_SEPARATORS).join(keywords)
    return text.title() if rng.random() < 0.2 else capitalize_first(text)


def non_english(rng: random.Random) -> str:
    if rng.random() < 0.55:
        subjects, verbs, places = rng.choice(LATIN_SCRIPT_LANGUAGES)
        return f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(places)}"
    return rng.choice(NON_ENGLISH_SENTENCES)


def emoji(rng: random.Random) -> str:
    return _social_post(rng, "".join(rng.choices(EMOJI, k=rng.randint(1, 4))), 0.45, 0.85)


def _social_post(rng: random.Random, tail: str, *bounds: float) -> str:
    """`tail` (hashtags, emoji) after a caption, after a social phrase, or alone."""
    lead = _branch(rng, *bounds)
    if lead == 2:
        return tail
    return f"{caption(rng) if lead == 0 else rng.choice(SOCIAL_PHRASES)} {tail}"


def empty(rng: random.Random) -> str | None:
    return rng.choice((None, None, "", "", " ", "   ", "\t", "\n", "\u00a0"))


def huge(rng: random.Random) -> str:
    """A whole article, a keyword-stuffed block or a base64 data URI pasted into the alt
    attribute: between HUGE_MIN_CHARS and HUGE_MAX_CHARS characters, log-uniformly."""
    size = int(math.exp(rng.uniform(math.log(HUGE_MIN_CHARS), math.log(HUGE_MAX_CHARS))))
    roll = rng.random()
    if roll < 0.2:
        payload = base64.b64encode(rng.randbytes(size * 3 // 4 + 3)).decode("ascii")
        return ("data:image/jpeg;base64," + payload)[:size]
    if roll < 0.6:
        pieces, separator = rng.choice(KEYWORD_TOPICS), ", "
    else:
        # A pool of sentences drawn with replacement: realistic enough, and fast at 200k.
        pieces, separator = [caption(rng) for _ in range(40)], ". "
    count = size // min(len(piece) for piece in pieces) + 1
    return separator.join(rng.choices(pieces, k=count))[:size]


def all_caps(rng: random.Random) -> str:
    if rng.random() < 0.25:
        return rng.choice(SHOUTED_ADS)
    return caption(rng).upper()


def title_case(rng: random.Random) -> str:
    """'A Young Woman Walks A Dog Along The Beach', or headline style with small words low."""
    words = caption(rng).split(" ")
    keep_small = rng.random() < 0.5
    return " ".join(
        word if keep_small and index and word in HEADLINE_SMALL_WORDS else capitalize_first(word)
        for index, word in enumerate(words)
    )


def lowercase_start(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return rng.choice(LOWERCASE_BRAND_CAPTIONS)
    return _lowercase_first(descriptive(rng))


def html(rng: random.Random) -> str:
    word, other = rng.choice(HTML_WORD_PAIRS)
    return fill(rng.choice(TEMPLATES["html"]), rng, {"word": word, "other": other})


def control_chars(rng: random.Random) -> str:
    words = caption(rng).split(" ")
    for _ in range(rng.randint(1, 3)):
        index = rng.randrange(len(words))
        words[index] += rng.choice(CONTROL_CHARACTERS)
    return " ".join(words)


def repetition(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.4:  # "A dog dog dog dog on the beach"
        words = descriptive(rng).split(" ")
        index = rng.randrange(1, len(words))
        words[index : index + 1] = [words[index]] * rng.randint(4, 8)
        return " ".join(words)
    if roll < 0.7:  # "Beach wedding beach wedding beach wedding"
        phrase = f"{rng.choice(FRAGMENT_MODIFIERS)} {rng.choice(FRAGMENT_HEADS)}"
        return capitalize_first(" ".join([phrase.lower()] * rng.randint(3, 6)))
    if roll < 0.85:  # "Love love love love love"
        word = rng.choice(REPEATED_WORDS)
        return capitalize_first(" ".join([word] * rng.randint(5, 10)))
    sentence = descriptive(rng)
    return ". ".join([sentence] * rng.randint(2, 4))


def fragment(rng: random.Random) -> str:
    """No determiner, no preposition: 'Italian cuisine', 'Sunset beach', 'Tokyo skyline'."""
    return (
        lambda: rng.choice(NATIONAL_DISHES + NATIONAL_TRADITIONS),
        lambda: f"{rng.choice(FRAGMENT_MODIFIERS)} {rng.choice(FRAGMENT_HEADS)}",
        lambda: f"{rng.choice(CITIES)[0]} skyline",
        lambda: rng.choice(SINGLE_WORD_FRAGMENTS),
    )[_branch(rng, 0.3, 0.8, 0.9)]()


def out_of_vocabulary(rng: random.Random) -> str:
    """Typos, product codes, lorem ipsum and keyboard mashing: tokens no vocabulary holds."""
    roll = rng.random()
    if roll < 0.45:
        return _with_typos(rng, descriptive(rng))
    if roll < 0.7:
        brand, model = rng.choice(PRODUCT_BRANDS)
        code = "".join(rng.choices(LETTERS.upper(), k=2)) + str(rng.randint(1000, 9999))
        return f"{brand} {model} {code}-{rng.randint(1, 999):03d} {rng.choice(PRODUCT_COLORS)}"
    if roll < 0.9:
        start = rng.randrange(len(LOREM_IPSUM) - 5)
        return capitalize_first(" ".join(LOREM_IPSUM[start : start + rng.randint(4, 12)]))
    return " ".join(rng.sample(KEYBOARD_GIBBERISH, 2))


def _with_typos(rng: random.Random, text: str) -> str:
    words = text.split(" ")
    long_words = [i for i, word in enumerate(words) if len(word) >= 5]
    for index in rng.sample(long_words, min(len(long_words), rng.randint(1, 3))):
        word = words[index]
        position = rng.randrange(1, len(word) - 1)
        typo = rng.randrange(3)
        if typo == 0:  # swapped letters
            word = word[:position] + word[position + 1] + word[position] + word[position + 2 :]
        elif typo == 1:  # dropped letter
            word = word[:position] + word[position + 1 :]
        else:  # doubled letter
            word = word[:position] + word[position] + word[position:]
        words[index] = word
    return " ".join(words)


GENERATORS: dict[str, Callable[[random.Random], str | None]] = {
    "descriptive": descriptive,
    "named_entities": named_entities,
    "boilerplate_wrapped": boilerplate_wrapped,
    "boilerplate_pattern": templated("boilerplate_pattern"),
    "placeholder": placeholder,
    "hashtags": hashtags,
    "handle": templated("handle"),
    "url": templated("url"),
    "file_name": templated("file_name"),
    "keyword_list": keyword_list,
    "non_english": non_english,
    "emoji": emoji,
    "empty": empty,
    "huge": huge,
    "all_caps": all_caps,
    "title_case": title_case,
    "lowercase_start": lowercase_start,
    "profanity": templated("profanity"),
    "sentiment": templated("sentiment"),
    "html": html,
    "control_chars": control_chars,
    "repetition": repetition,
    "fragment": fragment,
    "out_of_vocabulary": out_of_vocabulary,
}


# ---------------------------------------------------------------------------------------
# URLs.


class _UrlMaker:
    """Image and page URLs: unique image URLs (a random photo id, never reused) except for
    the few deliberate duplicates; images come in runs from the same page."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.photo_ids: set[str] = set()
        self.image_urls: list[str] = []
        self.site = rng.choice(SITES)
        self.page_url = ""

    def urls_for(self, alt_text: str | None) -> tuple[str, str]:
        """(image URL, page URL) of the next row."""
        rng = self.rng
        if not self.page_url or rng.random() >= SAME_PAGE_SHARE:
            self.site = rng.choice(SITES)
            self.page_url = self._url(self.site[0], self.site[3], alt_text)
        if self.image_urls and rng.random() < DUPLICATE_IMAGE_SHARE:
            image_url = rng.choice(self.image_urls)
        else:
            image_url = self._url(self.site[1], self.site[2], alt_text)
        self.image_urls.append(image_url)
        return image_url, self.page_url

    def _url(self, host: str, path: str, alt_text: str | None) -> str:
        rng = self.rng
        photo_id = f"{rng.getrandbits(40):010x}"
        while photo_id in self.photo_ids:
            photo_id = f"{rng.getrandbits(40):010x}"
        self.photo_ids.add(photo_id)
        fields = {
            "slug": slug(alt_text or ""),
            "photo_id": photo_id,
            "year": rng.randint(2008, 2018),
            "month": f"{rng.randint(1, 12):02d}",
            "day": f"{rng.randint(1, 28):02d}",
            "ext": rng.choices(IMAGE_EXTENSIONS, IMAGE_EXTENSION_WEIGHTS)[0],
            "section": rng.choice(PAGE_SECTIONS),
            "timestamp": rng.randint(1_300_000_000, 1_550_000_000),
            "handle": _handle(rng),
        }
        return f"https://{host}{path.format(**fields)}"


# ---------------------------------------------------------------------------------------
# The API.


def apportion(n: int, shares: dict[str, float]) -> dict[str, int]:
    """n split into whole counts in proportion to `shares` (largest remainder): the counts
    add up to n exactly, in the order of `shares`."""
    total = sum(shares.values())
    exact = {key: n * share / total for key, share in shares.items()}
    counts = {key: int(value) for key, value in exact.items()}
    left = n - sum(counts.values())
    by_remainder = sorted(exact, key=lambda key: exact[key] - counts[key], reverse=True)
    for key in by_remainder[:left]:
        counts[key] += 1
    return counts


def kind_counts(n: int) -> dict[str, int]:
    """How many of n rows each kind gets: KIND_SHARES apportioned by largest remainder."""
    return apportion(n, KIND_SHARES)


def generate_candidates(n: int, seed: int = 0) -> list[dict]:
    """n candidate rows {"image_url", "page_url", "alt_text", "kind"}, the same for the same
    (n, seed). alt_text is None for some "empty" rows, as a crawl without an alt attribute."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(seed)
    kinds = [kind for kind, count in kind_counts(n).items() for _ in range(count)]
    rng.shuffle(kinds)
    urls = _UrlMaker(rng)
    rows = []
    for kind in kinds:
        alt_text = GENERATORS[kind](rng)
        image_url, page_url = urls.urls_for(alt_text)
        rows.append(
            {"image_url": image_url, "page_url": page_url, "alt_text": alt_text, "kind": kind}
        )
    return rows


# Characters that end a line for some reader: csv and str.splitlines() split on more than
# "\n". NUL goes too, because csv readers before Python 3.11 refuse it.
_TSV_BREAKERS = re.compile("[\t\n\r\x00\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def tsv_field(alt_text: str | None) -> str:
    """alt_text as one TSV field: None becomes "", and tabs, line breaks and NUL become
    spaces, so that a row is always one line with the expected number of fields."""
    return _TSV_BREAKERS.sub(" ", alt_text or "")


def write_candidates(rows: list[dict], path: str, fmt: str = "tsv") -> None:
    """Write candidate rows to a local file.

    fmt:
    - "cc_tsv": the Conceptual Captions format, `alt_text<TAB>image_url`, no header;
    - "tsv": a header `alt_text<TAB>image_url<TAB>page_url`, then the rows; a `split`
      column too when rows carry one (the split a curation keeps for them);
    - "jsonl": one JSON object a line with all four keys (None stays null);
    - "parquet": columns alt_text, image_url, page_url, kind (all strings).
    The TSV formats are not quoted (read them with csv.QUOTE_NONE or split on tabs). In
    them alt_text goes through tsv_field(): None becomes an empty field and tabs, line
    breaks and NUL become spaces, so those rows read back with spaces where the original
    had them. JSONL escapes every non-ASCII character, so no reader splits a row on U+2028.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    if fmt == "parquet":
        schema = pa.schema(
            [(name, pa.string()) for name in ("alt_text", "image_url", "page_url", "kind")]
        )
        table = pa.Table.from_pylist(
            [{name: row.get(name) for name in schema.names} for row in rows], schema
        )
        pq.write_table(table, path)
        return
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        if fmt == "jsonl":
            for row in rows:
                out.write(json.dumps(row) + "\n")
        elif fmt == "tsv":
            columns = ["alt_text", "image_url", "page_url"]
            columns += ["split"] if any("split" in row for row in rows) else []
            out.write("\t".join(columns) + "\n")
            for row in rows:
                fields = [tsv_field(row.get(name)) for name in columns]
                out.write("\t".join(fields) + "\n")
        else:
            for row in rows:
                out.write(f"{tsv_field(row['alt_text'])}\t{row['image_url']}\n")
