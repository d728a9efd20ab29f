#!/usr/bin/python3
"""The token file `pentad prep --messages-key` should write, from the model's
own chat template and tokenizers.js alone (tests/tokenizer/chat_sft.sh).

Each conversation is rendered by its template (chat_render.py's Jinja2
environment, add_generation_prompt = False) and encoded by tokenizers.js
(hf_tokenizers.cjs plain_many: the turn tokens' texts are their ids). The
trained ids of an assistant message i are found without pentad's rule:
they run from the ids of the conversation before it with the assistant's
turn opened (messages[:i], add_generation_prompt = True, whose text must
start the whole one's) to the ids of the whole text cut after the first
end-of-turn token after that, both of which must be prefixes of the whole
conversation's ids (else the oracle fails: the cut would be ambiguous). A template that opens the assistant's
turn whatever add_generation_prompt says (Llama 3 Instruct's) is cut after
the last end-of-turn token: training data opens no turn at its end. The
document separator SEP (-1: none, where the format starts each
conversation with its own begin token) goes before each conversation, not
trained.

Usage: chat_sft.py CASE CONFIG ORACLE_DIR HF_CJS SEP END_TOKEN OUT_JSONL OUT_BIN
Writes the conversations (OUT_JSONL, field "messages") and the expected
token file (OUT_BIN: version 4, uint32 ids, then the loss mask)."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_render import render  # noqa: E402

PHRASES = ["What is 12 plus 7?", "19.", "Name three prime numbers.", "2, 3 and 5.",
           "  Leading and trailing spaces.  ", "Un café, s'il vous plaît.", "日本語で答えてください。",
           "Line one\nLine two\n", "Emoji 🙂 and symbols <>&.", "Why?", "Because the sum of 12 and 7 is 19.",
           "A longer answer that goes on for a while, with commas, numbers like 3.14159, and a question?"]


def conversations(case, n):
    seed = 5
    out = []

    def rand(k):
        nonlocal seed
        seed = (seed * 1103515245 + 12345) % 2147483648
        return (seed >> 8) % k

    for i in range(n):
        turns = 1 + rand(3)
        msgs = []
        if case != "gemma" and rand(2):
            msgs.append({"role": "system", "content": PHRASES[rand(len(PHRASES))]})
        for _ in range(turns):
            msgs.append({"role": "user", "content": PHRASES[rand(len(PHRASES))]})
            answer = PHRASES[rand(len(PHRASES))]
            if case == "qwen3" and rand(2):  # reasoning before the answer, in the forms Qwen3's template reads
                answer = ["<think>\nFirst think.\n</think>\n\n", "</think>", "<think>\n\n\nx\n</think>\n"][rand(3)] + answer
            msgs.append({"role": "assistant", "content": answer})
        out.append(msgs)
    return out


def main():
    if len(sys.argv) != 9:
        sys.exit(__doc__)
    case, config, oracle, hf_cjs, sep, end_token, out_jsonl, out_bin = sys.argv[1:]
    sep = int(sep)
    cfg = json.load(open(config, encoding="utf-8"))
    convs = conversations(case, 40)
    texts, plan = [], []  # plan: per conversation, (index of its text, [(index, index)] per assistant message)

    def add(text):
        texts.append(text)
        return len(texts) - 1

    for msgs in convs:
        whole = render(cfg, msgs, False)
        if whole == render(cfg, msgs, True):
            # The template opens the assistant's turn whatever add_generation_prompt
            # says (Llama 3 Instruct's): training data ends at the last turn's end.
            whole = whole[:whole.rfind(end_token) + len(end_token)]
        spans = []
        for i, m in enumerate(msgs):
            if m["role"] != "assistant":
                continue
            before = render(cfg, msgs[:i], True)
            assert whole.startswith(before), f"the rendering before message {i} is not a prefix of the whole"
            cut = whole.find(end_token, len(before))
            assert cut >= 0, f"no {end_token} after message {i}"
            through = whole[:cut + len(end_token)]
            spans.append((add(before), add(through)))
        plan.append((add(whole), spans))
    with tempfile.TemporaryDirectory() as tmp:
        json.dump(texts, open(f"{tmp}/in.json", "w", encoding="utf-8"), ensure_ascii=False)
        subprocess.run(["node", hf_cjs, "plain_many", oracle, f"{tmp}/in.json", f"{tmp}/out.json"], check=True)
        ids = json.load(open(f"{tmp}/out.json"))
    ids_of = lambda j: ids[j]
    stream, trained = [], []
    for whole_at, spans in plan:
        whole = ids_of(whole_at)
        mask = [False] * len(whole)
        for b, t in spans:
            begin, end = ids_of(b), ids_of(t)
            assert whole[:len(begin)] == begin and whole[:len(end)] == end, "ids of a prefix are not a prefix of the ids"
            for p in range(len(begin), len(end)):
                mask[p] = True
        if sep >= 0:
            stream.append(sep)
            trained.append(False)
        stream += whole
        trained += mask
    with open(out_jsonl, "w", encoding="utf-8") as f:
        for msgs in convs:
            f.write(json.dumps({"id": len(msgs), "messages": msgs}, ensure_ascii=False) + "\n")
    header = [20240520, 4, len(stream)] + [0] * 253
    bits = bytearray((len(stream) + 7) // 8)
    for i, t in enumerate(trained):
        if t:
            bits[i >> 3] |= 1 << (i & 7)
    with open(out_bin, "wb") as f:
        f.write(b"".join(x.to_bytes(4, "little", signed=True) for x in header))
        f.write(b"".join(x.to_bytes(4, "little") for x in stream))
        f.write(bytes(bits))
    print(f"oracle: {len(convs)} conversations, {len(stream)} ids, {sum(trained)} trained")


if __name__ == "__main__":
    main()
