"""Writes the fairseq tokenization fixture by running the TUPE authors' tools.

Runs the text of each case through the GLUE pipeline of guolinke/TUPE
(`preprocess/glue/process.sh`): their Python cleanup scripts, Moses
`normalize-punctuation.perl en`, `remove-non-printing-char.perl` and
`tokenizer.perl -threads 8 -no-escape -l en`, gawk's `tolower` and their
fastBPE's `applybpe`; then encodes the lines with their fairseq `Dictionary`
and `Binarizer` and builds sentence pairs with their `PrependTokenDataset` and
`ConcatSentencesDataset` as `--task sentence_prediction --init-token 0
--separator-token 2` does. Their real `bpe-code` is not public, so small
codes are learned with their fastBPE `learnbpe` on the GLUE training text,
and the dictionary is built from that text by their `Dictionary` as
`fairseq-preprocess` builds one.

Writes, under `--output_dir`: `bpe-code`, `dict.txt` and `cases.json` (each
case's text, the Moses-tokenized line, the BPE line and the ids; the pairs'
ids). tests/models/test_fairseq_tokenizer.py checks the package's tokenizer
against them with neither perl, fastBPE nor their code.

Needs perl, gawk, g++ and torch (CPU), and checkouts of guolinke/TUPE and
moses-smt/mosesdecoder; their code is not part of this repository.

Example:

    git clone https://github.com/guolinke/TUPE /tmp/TUPE
    git clone https://github.com/moses-smt/mosesdecoder /tmp/mosesdecoder
    LC_ALL=C.UTF-8 python scripts/make_fairseq_tokenization_fixture.py \\
        --tupe_dir=/tmp/TUPE --moses_dir=/tmp/mosesdecoder
"""

import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import types

from make_tupe_reference_fixture import fixture_parser
from make_tupe_reference_fixture import load_module
from make_tupe_reference_fixture import stand_in_package

# process.sh's chain from the raw column to the tokenized, lowercased line.
PIPELINE = (
    "{python} {common}/remove_non_utf8_chars.py"
    " | {python} {common}/precleanup_english.py"
    " | perl {moses}/normalize-punctuation.perl en"
    " | perl {moses}/remove-non-printing-char.perl"
    " | {python} {glue}/cleanup.py"
    " | {python} {pretrain}/replace_patterns.py"
    " | {python} {common}/align_text.py"
    " | sed 's/\\\\/ /g'"
    " | perl {moses}/tokenizer.perl -threads 8 -no-escape -l en"
    " | gawk '{{print tolower($0);}}'"
)
MERGES = 3000
THRESHOLD = 2  # tokens seen once stay out of the dictionary: <unk>
GLUE_CASES = 160  # per task
SEED = 0

# Text the GLUE files lack: each line of their pipeline is one case, so no
# case holds "\n" or "\r" (their first script splits lines at both).
ADVERSARIAL = [
    "",
    " ",
    "\t",
    "   leading and trailing   ",
    "Visit https://www.example.com/path?q=1&x=2 now!",
    "see www.google.com, or http://foo.org/a_b-c.html.",
    "foo-bar.com and my-site.net",
    "Mail John.Doe@Example.org or a_b@c.co.uk today.",
    "open report_2020.pdf and notes-final.txt",
    "C:\\Users\\me\\file.txt and a\\b",
    "<url> <email> <file> <unk> <s> </s> <pad> <mask>",
    "pi is 3.14, e is 2.718.",
    "1,000,000 people; 5,300 cars; 1,2,3",
    "50 % off, 5 %, 100%",
    "10\u00a0000 and 3\u00a0cm and 5\u00a0\u00baC and n\u00ba\u00a05",
    "\u0663\u00a0\u0664 and \u0663 % and \uff11\u00a0\uff12",
    "in the 1990's and the '80s",
    "$5.00, \u20ac3, \u00a320 and \u00a5100",
    "``Hello,'' she said.",
    '"quoted," he said. "Quoted".',
    "\u2018single\u2019 and it\u2019s and don\u2019t",
    "\u201cdouble\u201d and \u201egerman\u201c",
    "\u00abfrench\u00bb and \u00a0\u00ab\u00a0spaced\u00a0\u00bb\u00a0 and << arrows >>",
    "don't, can't, won't, I'm, you're, we've, they'll, she'd",
    "rock 'n' roll, 'tis, the students' books, 'hello'",
    "O'Neil and d'Artagnan and l'amour",
    "Mr. Smith went to Washington. Dr. Who?",
    "the U.S.A. and e.g. this and i.e., that",
    "No. 5 and no. 5 and Art. 12 and pp. 3",
    "at 5 p.m. we left u.s.",
    "Wait... what?? Wait.... what!!! Really?!",
    "..... and .. and . and ...",
    "a -- b - c --- d",
    "a\u2014b, a\u2013b, well-known, light-hearted, x--y",
    "(parens) [brackets] {braces} <angle>",
    "*bold* text and a * b and **",
    "C++ and C# and F# and a&b | c ~ d ^ e",
    "@user #hashtag $var %p",
    "!!!",
    ".",
    "'",
    '"',
    ",, and ,. and ,",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber",
    "Cafe\u0301 with a combining accent",
    "Stra\u00dfe and \u1e9e",
    "\u0130stanbul and I\u0307",
    "\u0391\u0392\u0393 \u03b1\u03b2\u03b3 \u039f\u03b4\u03c5\u03c3\u03c3\u03b5\u03cd\u03c2",
    "\u041c\u043e\u0441\u043a\u0432\u0430 \u2014 \u0441\u0442\u043e\u043b\u0438\u0446\u0430.",
    "\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "\u0939\u093f\u0928\u094d\u0926\u0940 \u0915\u094d\u0937\u0924\u094d\u0930\u093f\u092f",
    "\u05e2\u05d1\u05e8\u05d9\u05ea and \u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "\ufb01ne \ufb02ow, \u2160\u2161\u216b, x\u00b2 y\u00b3, \u00bd",
    "\uff21\uff22\uff23\uff11\uff12\uff13 full width",
    "\u01c5 titlecase and \u1f88",
    "I \u2764\ufe0f NY \U0001f600\U0001f44d\U0001f3fd",
    "family \U0001f468\u200d\U0001f469\u200d\U0001f467 flag \U0001f1fa\U0001f1f8",
    "nul\x00byte and bell\x07",
    "a\x1fb a\x1cb a\x85b",
    "zero\u200bwidth soft\u00adhyphen joiner\u200d",
    "bidi\u202eoverride\u202c and \ufeffBOM",
    "tab\there\tand\t\tthere",
    "vertical\x0btab form\x0cfeed",
    "line\u2028separator para\u2029separator",
    "no\u00a0break\u00a0space and thin\u2009space",
    "ideographic\u3000space",
    "\u2026 ellipsis\u2026 and \u00b4acute\u00b4",
    "\u201a low quote and \u2019 alone",
    "a" * 300,
    "supercalifragilistic" * 20,
    "x-" * 50,
    "http://" + "a" * 200 + ".com",
    "a.b.c and end.",
    "mr.",
    "Ph.D. and p.m.",
    "test.. and test. and .test",
    "\u00bfQu\u00e9? \u00a1S\u00ed!",
    "#@!$%^&*()_+=",
    "under_score and snake_case_name",
    "3-4 and 3 - 4 and -5 and +5",
    "email@ and @domain and a@b",
    "Tab\tseparated\tcolumns",
    "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22 and \u0ba4\u0bae\u0bbf\u0bb4\u0bcd",
    "\u0661,\u0662,\u0663 and \u0663's and \u00b2,x and \u00bd,y",
    "x.-y and mr.-smith and u.s.-based and no.-5 and pp.-3",
    "e\u0301t\u00e9 and n\u0303 and l\u2019\u00e9t\u00e9 and a\u2018b",
    "\u300c\u5f15\u7528\u300d\u3001\uff0c\u3002 and \u2014\u2014",
]
# Bytes that are not UTF-8 (their first script drops them).
ADVERSARIAL_BYTES = [
    b"caf\xe9 latin-1",
    b"cut \xe2\x82 sequence",
    b"\xff\xfe bom-like",
    b"surrogate \xed\xa0\x80 bytes",
]


def read_column(path, column, skip_header):
    """The 1-based `column` of a GLUE TSV file, as `cut -f` gives it."""
    with open(path, "rb") as file:
        lines = file.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if skip_header:
        lines = lines[1:]
    return [line.split(b"\t")[column - 1] for line in lines]


def glue_texts(glue_dir):
    """(training lines, sample of lines) of CoLA and SST-2, as bytes."""
    tasks = {"CoLA": (4, False), "SST-2": (1, True)}
    generator = random.Random(SEED)
    train, sample = [], []
    for task, (column, skip_header) in tasks.items():
        for split in ("train", "dev"):
            path = os.path.join(glue_dir, task, f"{split}.tsv")
            lines = read_column(path, column, skip_header)
            if split == "train":
                train += lines
            sample += generator.sample(lines, GLUE_CASES // 2)
    return train, sample


def run_pipeline(lines, tupe_dir, moses_dir, workdir):
    """Their GLUE pipeline on `lines` (bytes): the tokenized lines (str)."""
    source = os.path.join(workdir, "raw")
    with open(source, "wb") as file:
        file.write(b"".join(line + b"\n" for line in lines))
    command = PIPELINE.format(
        python=sys.executable,
        common=os.path.join(tupe_dir, "preprocess", "common"),
        glue=os.path.join(tupe_dir, "preprocess", "glue"),
        pretrain=os.path.join(tupe_dir, "preprocess", "pretrain"),
        moses=os.path.join(moses_dir, "scripts", "tokenizer"),
    )
    with open(source, "rb") as stdin:
        output = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            stdin=stdin,
            capture_output=True,
            check=True,
        ).stdout
    tokenized = output.decode("utf-8").split("\n")[:-1]
    if len(tokenized) != len(lines):
        raise RuntimeError(f"{len(lines)} lines in, {len(tokenized)} out")
    return tokenized


def compile_fastbpe(tupe_dir, workdir):
    """Their fastBPE, compiled as process.sh compiles it."""
    binary = os.path.join(workdir, "fastbpe")
    main_cc = os.path.join(tupe_dir, "fastbpe", "fastBPE", "main.cc")
    subprocess.run(
        ["g++", "-O3", main_cc, "-pthread", "-o", binary], check=True
    )
    return binary


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as file:
        file.write("".join(line + "\n" for line in lines))


def fastbpe(binary, *args):
    subprocess.run([binary, *args], check=True, capture_output=True)


def apply_codes(binary, lines, codes, workdir):
    """Their `fastbpe applybpe` on `lines`: the BPE lines."""
    source = os.path.join(workdir, "tok")
    target = os.path.join(workdir, "bpe")
    write_lines(source, lines)
    fastbpe(binary, "applybpe", target, source, codes)
    with open(target, encoding="utf-8") as file:
        return file.read().split("\n")[:-1]


def import_authors_data(tupe_dir):
    """Their `fairseq.data` classes used here, with the rest stubbed."""
    source = os.path.join(tupe_dir, "fairseq")
    package = stand_in_package("fairseq")
    package.data = data = stand_in_package("fairseq.data")
    data.data_utils = types.ModuleType("fairseq.data.data_utils")
    for name in ("tokenizer", "binarizer"):
        load_module(f"fairseq.{name}", os.path.join(source, f"{name}.py"))
    for name, attribute in (
        ("fairseq_dataset", "FairseqDataset"),
        ("base_wrapper_dataset", "BaseWrapperDataset"),
        ("prepend_token_dataset", "PrependTokenDataset"),
        ("concat_sentences_dataset", "ConcatSentencesDataset"),
        ("dictionary", "Dictionary"),
    ):
        module = load_module(
            f"fairseq.data.{name}", os.path.join(source, "data", f"{name}.py")
        )
        setattr(data, attribute, getattr(module, attribute))
    data.Binarizer = sys.modules["fairseq.binarizer"].Binarizer
    return data


def build_dictionary(data, bpe_file, path):
    """dict.txt as their fairseq-preprocess writes one (padding factor 8)."""
    dictionary = data.Dictionary()
    data.Dictionary.add_file_to_dictionary(
        bpe_file, dictionary, sys.modules["fairseq.tokenizer"].tokenize_line, 1
    )
    dictionary.finalize(threshold=THRESHOLD, padding_factor=8)
    dictionary.save(path)


def binarize(data, dictionary, lines, workdir):
    """Their Binarizer's ids (end-of-sentence appended) of each line."""
    path = os.path.join(workdir, "binarize")
    write_lines(path, lines)
    encoded = []
    data.Binarizer.binarize(path, dictionary, encoded.append)
    return encoded


class ListDataset:
    """Stand-in for their indexed dataset: tensors held in a list."""

    def __init__(self, tensors):
        self.tensors = tensors
        self.sizes = [len(tensor) for tensor in tensors]

    def __getitem__(self, index):
        return self.tensors[index]

    def __len__(self):
        return len(self.tensors)


def pair_ids(data, encoded, pairs):
    """Their sentence_prediction layout (--init-token 0 --separator-token 2)."""
    first = data.PrependTokenDataset(
        ListDataset([encoded[a] for a, _ in pairs]), 0
    )
    second = data.PrependTokenDataset(
        ListDataset([encoded[b] for _, b in pairs]), 2
    )
    concatenated = data.ConcatSentencesDataset(first, second)
    return [concatenated[i].tolist() for i in range(len(pairs))]


def case_record(text, moses, bpe, ids):
    if isinstance(text, bytes):
        record = {"bytes": base64.b64encode(text).decode("ascii")}
    else:
        record = {"text": text}
    return {**record, "moses": moses, "bpe": bpe, "ids": ids}


def make_fixture(flags, workdir):
    train, sample = glue_texts(flags.glue_dir)
    texts = [line.decode("utf-8") for line in sample] + ADVERSARIAL
    raw = [text.encode("utf-8") for text in texts] + ADVERSARIAL_BYTES
    moses = run_pipeline(raw, flags.tupe_dir, flags.moses_dir, workdir)
    # The codes and the dictionary see the cases too, so that their rarer
    # characters merge and reach the dictionary.
    train_tokens = os.path.join(workdir, "train.tok")
    write_lines(
        train_tokens,
        run_pipeline(train, flags.tupe_dir, flags.moses_dir, workdir) + moses,
    )
    fastbpe_binary = compile_fastbpe(flags.tupe_dir, workdir)
    codes = os.path.join(flags.output_dir, "bpe-code")
    with open(codes, "wb") as file:
        file.write(
            subprocess.run(
                [fastbpe_binary, "learnbpe", str(MERGES), train_tokens],
                check=True,
                capture_output=True,
            ).stdout
        )
    train_bpe = os.path.join(workdir, "train.bpe")
    fastbpe(fastbpe_binary, "applybpe", train_bpe, train_tokens, codes)
    data = import_authors_data(flags.tupe_dir)
    dict_path = os.path.join(flags.output_dir, "dict.txt")
    build_dictionary(data, train_bpe, dict_path)
    # As their sentence_prediction (and masked_lm) task loads it.
    dictionary = data.Dictionary.load(dict_path)
    dictionary.add_symbol("<mask>")

    bpe = apply_codes(fastbpe_binary, moses, codes, workdir)
    encoded = binarize(data, dictionary, bpe, workdir)
    count = len(encoded)
    pairs = [(i, (i * 7 + 3) % count) for i in range(0, count, 3)]
    cases = [
        case_record(text, m, b, e.tolist())
        for text, m, b, e in zip(texts + ADVERSARIAL_BYTES, moses, bpe, encoded)
    ]
    pair_records = [
        {"first": a, "second": b, "ids": ids}
        for (a, b), ids in zip(pairs, pair_ids(data, encoded, pairs))
    ]
    fixture = {
        "vocabulary_size": len(dictionary),
        "mask_id": dictionary.index("<mask>"),
        "cases": cases,
        "pairs": pair_records,
    }
    with open(os.path.join(flags.output_dir, "cases.json"), "w") as file:
        file.write(one_record_per_line(fixture))


def one_record_per_line(fixture):
    """JSON with each case and pair on a line of its own (diffs stay small)."""
    lines = []
    for key, value in fixture.items():
        if isinstance(value, list):
            records = ",\n".join(
                json.dumps(v, ensure_ascii=True) for v in value
            )
            lines.append(f'"{key}": [\n{records}\n]')
        else:
            lines.append(f'"{key}": {json.dumps(value)}')
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main(argv=None):
    parser = fixture_parser(
        __doc__,
        "preprocess/, fastbpe/ and fairseq/ are used",
        "fairseq_tokenization",
        "Where bpe-code, dict.txt and cases.json go.",
    )
    parser.add_argument(
        "--moses_dir",
        required=True,
        help="A checkout of github.com/moses-smt/mosesdecoder (scripts/).",
    )
    root = os.path.join(os.path.dirname(__file__), "..")
    parser.add_argument(
        "--glue_dir",
        default=os.path.normpath(
            os.path.join(root, "..", "shared", "data", "glue")
        ),
        help="GLUE TSV files: CoLA/ and SST-2/ with train.tsv and dev.tsv.",
    )
    flags = parser.parse_args(argv)
    os.makedirs(flags.output_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as workdir:
        make_fixture(flags, workdir)
    for name in sorted(os.listdir(flags.output_dir)):
        path = os.path.join(flags.output_dir, name)
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
