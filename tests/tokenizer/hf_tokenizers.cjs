// The tokenizers.js side of the Hugging Face tokenizer export test
// (hf_export.sh): tokenizers.js (npm package @huggingface/tokenizers, a
// JavaScript implementation of Hugging Face's `tokenizers`, installed by
// scripts/deps.sh into .deps/npm) loads a tokenizer.json that `pentad ckpt
// export --tokenizer` wrote. Subcommands:
//   pentad DIR BOS TRAIN_BIN SEP FILE...
//        for each FILE (with no special token's text): tokenizers.js's
//        encode(text) == [BOS] + pentad's ids ([] when BOS is -1), pentad's
//        ids being the FILE's document in a `pentad prep` train.bin (one SEP
//        before each FILE; SEP -1: one FILE, the whole train.bin); and
//        tokenizers.js's decode of pentad's ids == text (JavaScript's
//        text.normalize("NFC") for a tokenizer.json with an NFC normalizer)
//   tiktoken DIR ENC FILE...
//        for each FILE: tokenizers.js's encode(text, no template) ==
//        js-tiktoken's encode(text, "all") (special tokens' text encoded as
//        the special ids, as Hugging Face's added tokens are)
//   encode DIR TEXT
//        prints tokenizers.js's ids of TEXT (with the template's tokens)
//   plain DIR FILE
//        prints tokenizers.js's ids of FILE's text with no template's tokens
//        (the added tokens' texts in it are their ids), as transformers'
//        apply_chat_template tokenizes a rendered chat
//   plain_many DIR IN OUT
//        the same for each text of the JSON list IN: OUT is the JSON list of
//        their ids
// Exit code 1 on any mismatch.
"use strict";
const fs = require("fs");
const path = require("path");

const { pinned } = require("./npm_pinned.cjs");

const kVersion = "0.2.0";
const kTiktoken = "1.0.21";

// The tokenizer of DIR, and whether its normalizer is NFC (Qwen2's): then
// its decode gives back the text in NFC, not the text.
function tokenizer(dir) {
  const { Tokenizer } = pinned("@huggingface/tokenizers", kVersion)();
  const json = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
  const tj = json("tokenizer.json");
  const nfc = tj.normalizer !== null && typeof tj.normalizer === "object" && tj.normalizer.type === "NFC";
  return [new Tokenizer(tj, json("tokenizer_config.json")), nfc];
}

// The ids of a `pentad prep` token file, cut into documents at sep (sep -1:
// one document, the whole file).
function documents(file, sep) {
  const b = fs.readFileSync(file);
  const [magic, version, n] = new Int32Array(b.buffer.slice(b.byteOffset, b.byteOffset + 1024));
  if (magic !== 20240520 || (version !== 1 && version !== 2)) throw new Error(`${file}: not a token file`);
  const body = b.subarray(1024);
  const docs = sep < 0 ? [[]] : [];
  for (let i = 0; i < n; i++) {
    const id = version === 1 ? body.readUInt16LE(2 * i) : body.readUInt32LE(4 * i);
    if (id === sep) docs.push([]);
    else if (docs.length === 0) throw new Error(`${file}: the first id is ${id}, not the separator ${sep}`);
    else docs[docs.length - 1].push(id);
  }
  return docs;
}

function firstDiff(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

function main() {
  const [cmd, dir, ...args] = process.argv.slice(2);
  let failures = 0, n_ids = 0;
  const report = (ok, what) => { console.log(`${ok ? "ok  " : "FAIL"} ${what}`); if (!ok) failures++; };
  const compare = (name, got, want, what) => {
    const at = firstDiff(got, want);
    n_ids += want.length;
    report(at < 0, `${name}: ${what}, ${want.length} ids` +
      (at < 0 ? "" : ` (first difference at id ${at}: tokenizers.js ${got.slice(at, at + 8)}, expected ${want.slice(at, at + 8)})`));
  };
  const [tok, nfc] = tokenizer(dir);
  if (cmd === "pentad") {
    const [bos, trainBin, sep, ...files] = args;
    const docs = documents(trainBin, Number(sep));
    report(docs.length === files.length, `${docs.length} documents in ${path.basename(trainBin)} for ${files.length} files`);
    if (docs.length !== files.length) return 1;
    files.forEach((file, d) => {
      const text = fs.readFileSync(file, "utf8");
      const name = path.basename(file);
      const want = Number(bos) >= 0 ? [Number(bos), ...docs[d]] : docs[d];
      compare(name, tok.encode(text).ids, want, "tokenizers.js encode == " + (Number(bos) >= 0 ? `[${bos}] + ` : "") + "pentad's ids");
      report(tok.decode(docs[d]) === (nfc ? text.normalize("NFC") : text),
             `${name}: tokenizers.js decode of pentad's ids == the text` + (nfc ? " in NFC" : ""));
    });
  } else if (cmd === "tiktoken") {
    const [enc, ...files] = args;
    const js = pinned("js-tiktoken", kTiktoken);
    const encoder = new (js("lite").Tiktoken)(js(`ranks/${enc}`));
    for (const file of files) {
      const text = fs.readFileSync(file, "utf8");
      compare(path.basename(file), tok.encode(text, { add_special_tokens: false }).ids, encoder.encode(text, "all"),
              "tokenizers.js encode == js-tiktoken encode(text, \"all\")");
    }
  } else if (cmd === "encode") {
    console.log(tok.encode(args[0]).ids.join(" "));
    return 0;
  } else if (cmd === "plain_many") {
    const texts = JSON.parse(fs.readFileSync(args[0], "utf8"));
    fs.writeFileSync(args[1], JSON.stringify(texts.map((t) => tok.encode(t, { add_special_tokens: false }).ids)));
    return 0;
  } else if (cmd === "plain") {
    console.log(tok.encode(fs.readFileSync(args[0], "utf8"), { add_special_tokens: false }).ids.join(" "));
    return 0;
  } else {
    console.error("usage: hf_tokenizers.cjs pentad DIR BOS TRAIN_BIN SEP FILE... | tiktoken DIR ENC FILE... | encode DIR TEXT | plain DIR FILE | plain_many DIR IN OUT");
    return 2;
  }
  console.log(`${n_ids} ids compared, ${failures} failures`);
  return failures === 0 ? 0 : 1;
}

process.exit(main());
