// The js-tiktoken side of the tokenizer oracle test and benchmark: an
// independent implementation of tiktoken's encoder (npm package js-tiktoken,
// installed by scripts/deps.sh into .deps/npm). Subcommands:
//   ranks ENC OUT                write ENC's mergeable ranks as a .tiktoken file
//   compare ENC RANKS TRAIN_BIN SEP OUT_DIR FILE...
//                                check pentad's ids (a `pentad prep` train.bin,
//                                one SEP before each FILE) against js-tiktoken's
//   bench ENC FILE REPS          median MB/s of js-tiktoken's encode over FILE
//   decode ENC IDS OUT           js-tiktoken's decode of the ids in IDS (one
//                                line, space-separated) written to OUT as UTF-8
//   choices ENC JSONL OUT        HellaSwag JSON Lines (ctx, endings, label) as a
//                                multiple-choice eval file in llm.c's layout:
//                                encode(ctx), encode(" " + ending), written here
//   sft ENC JSONL PROMPT COMPLETION EOT OUT
//                                prompt/completion JSON Lines as the token file
//                                with a loss mask that `pentad prep
//                                --prompt-key --completion-key` writes with no
//                                validation part (docs/running.md): EOT before
//                                each line, encode(prompt) not trained,
//                                encode(completion) trained, and each EOT after
//                                a completion trained (one more at the end)
// ENC is gpt2 or cl100k_base. Exit code 1 on any mismatch.
"use strict";
const fs = require("fs");
const path = require("path");

const { pinned } = require("./npm_pinned.cjs");

const kVersion = "1.0.21";

function loadJs() {
  const js = pinned("js-tiktoken", kVersion);
  return { lite: js("lite"), ranks: (enc) => js(`ranks/${enc}`) };
}

// [[rank, base64], ...] of an encoding, in rank order.
function mergeableRanks(js, enc) {
  const out = [];
  for (const line of js.ranks(enc).bpe_ranks.split("\n").filter(Boolean)) {
    const [, offset, ...tokens] = line.split(" ");
    tokens.forEach((t, i) => out.push([Number(offset) + i, t]));
  }
  return out.sort((a, b) => a[0] - b[0]);
}

// Maximal valid UTF-8 runs and maximal invalid subparts (Unicode Table 3-7),
// as [{valid, begin, end}]; adjacent invalid subparts are one segment.
function segments(buf) {
  const segs = [];
  const push = (valid, b, e) => {
    const last = segs[segs.length - 1];
    if (last && last.valid === valid && last.end === b) last.end = e;
    else segs.push({ valid, begin: b, end: e, subparts: 0 });
    if (!valid) segs[segs.length - 1].subparts++;
  };
  let i = 0;
  while (i < buf.length) {
    const c = buf[i];
    let need = 0, lo = 0x80, hi = 0xbf;
    if (c < 0x80) { push(true, i, i + 1); i++; continue; }
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c === 0xe0) { need = 2; lo = 0xa0; }
    else if ((c >= 0xe1 && c <= 0xec) || c === 0xee || c === 0xef) need = 2;
    else if (c === 0xed) { need = 2; hi = 0x9f; }
    else if (c === 0xf0) { need = 3; lo = 0x90; }
    else if (c >= 0xf1 && c <= 0xf3) need = 3;
    else if (c === 0xf4) { need = 3; hi = 0x8f; }
    else { push(false, i, i + 1); i++; continue; }
    let k = 1;
    for (; k <= need; k++) {
      const b = buf[i + k];
      const ok = i + k < buf.length && (k === 1 ? b >= lo && b <= hi : b >= 0x80 && b <= 0xbf);
      if (!ok) break;
    }
    if (k > need) { push(true, i, i + need + 1); i += need + 1; } else { push(false, i, i + k); i += k; }
  }
  return segs;
}

function readIds(file) {
  const b = fs.readFileSync(file);
  const header = new Int32Array(b.buffer.slice(b.byteOffset, b.byteOffset + 1024));
  const [magic, version, n] = header;
  if (magic !== 20240520 || (version !== 1 && version !== 2)) throw new Error(`${file}: not a token file`);
  const body = b.subarray(1024);
  const ids = new Array(n);
  for (let i = 0; i < n; i++) ids[i] = version === 1 ? body.readUInt16LE(2 * i) : body.readUInt32LE(4 * i);
  return { version, ids };
}

function firstDiff(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

// encode(text, [], []): no special token is allowed nor refused, so special
// tokens' text is ordinary text (tiktoken's encode_ordinary), as in pentad.
function compare(js, enc, ranksFile, trainBin, sep, outDir, files) {
  const encoder = new js.lite.Tiktoken(js.ranks(enc));
  const tokenBytes = [];
  for (const line of fs.readFileSync(ranksFile, "latin1").split("\n").filter(Boolean)) {
    const [b64, rank] = line.split(" ");
    tokenBytes[Number(rank)] = Buffer.from(b64, "base64");
  }
  const { version, ids } = readIds(trainBin);
  // The documents, cut at the separator (ordinary text never encodes to it).
  const docs = [];
  for (const id of ids) {
    if (id === sep) docs.push([]);
    else if (docs.length === 0) { console.log(`FAIL ${enc}: the first id is ${id}, not the separator ${sep}`); return 1; }
    else docs[docs.length - 1].push(id);
  }
  let failures = 0, n_ids = 0, n_bytes = 0;
  const report = (ok, what) => { console.log(`${ok ? "ok  " : "FAIL"} ${enc} ${what}`); if (!ok) failures++; };
  report(docs.length === files.length, `${docs.length} documents in ${path.basename(trainBin)} (version ${version}) for ${files.length} files`);
  if (docs.length !== files.length) return 1;
  files.forEach((file, d) => {
    const buf = fs.readFileSync(file);
    const got = docs[d];
    n_ids += got.length;
    n_bytes += buf.length;
    fs.writeFileSync(path.join(outDir, `doc${d}.ids`), Buffer.from(new Uint32Array(got).buffer));
    const segs = segments(buf);
    const name = path.relative(process.cwd(), file);
    if (segs.every((s) => s.valid)) {
      const want = encoder.encode(buf.toString("utf8"), [], []);
      const at = firstDiff(got, want);
      report(at < 0, `${name}: ${got.length} ids == js-tiktoken's ${want.length}` +
        (at < 0 ? "" : ` (first difference at id ${at}: pentad ${got.slice(at, at + 8)} js ${want.slice(at, at + 8)})`));
      return;
    }
    // Text with invalid UTF-8: each valid run must give js-tiktoken's ids of
    // that run, and each invalid run ids that spell exactly its bytes.
    // First: the segmentation replaced by U+FFFD per subpart equals the
    // WHATWG decoder's output (so the runs are the ones meant).
    const replaced = Buffer.concat(segs.map((s) => s.valid ? buf.subarray(s.begin, s.end)
                                                             : Buffer.from("\ufffd".repeat(s.subparts))));
    report(replaced.equals(Buffer.from(new TextDecoder("utf-8").decode(buf))),
           `${name}: the UTF-8 segmentation agrees with TextDecoder's replacement`);
    let k = 0, ok = true, where = "";
    for (const s of segs) {
      if (s.valid) {
        const want = encoder.encode(buf.subarray(s.begin, s.end).toString("utf8"), [], []);
        const have = got.slice(k, k + want.length);
        const d = firstDiff(have, want);
        if (d >= 0) {
          ok = false;
          where = `valid run at byte ${s.begin}, its id ${d}: pentad ${have.slice(d, d + 8)} js ${want.slice(d, d + 8)}`;
          break;
        }
        k += want.length;
      } else {
        const bytes = [];
        while (k < got.length && bytes.length < s.end - s.begin) bytes.push(...tokenBytes[got[k++]]);
        if (!Buffer.from(bytes).equals(buf.subarray(s.begin, s.end))) { ok = false; where = `invalid run at byte ${s.begin}`; break; }
      }
    }
    if (ok && k !== got.length) { ok = false; where = `${got.length - k} ids left over`; }
    const n_bad = segs.filter((s) => !s.valid).length;
    report(ok, `${name}: ${segs.length - n_bad} valid runs equal js-tiktoken's ids, ${n_bad} invalid runs spelled byte for byte` +
      (ok ? "" : ` (${where})`));
  });
  console.log(`${enc}: ${n_ids} ids over ${n_bytes} bytes compared, ${failures} failures`);
  return failures === 0 ? 0 : 1;
}

function bench(js, enc, file, reps) {
  const encoder = new js.lite.Tiktoken(js.ranks(enc));
  const text = fs.readFileSync(file, "utf8");
  const mb = Buffer.byteLength(text) / 1e6;
  encoder.encode(text.slice(0, 100000), [], []);  // warm-up (JIT)
  // MB/s over wall time and over the process's CPU time (user + system),
  // which other work on a shared machine inflates less.
  const rates = [], cpuRates = [];
  let n = 0;
  for (let r = 0; r < reps; r++) {
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    n = encoder.encode(text, [], []).length;
    const c = process.cpuUsage(c0);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    rates.push(mb / s);
    cpuRates.push(mb / ((c.user + c.system) / 1e6));
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(JSON.stringify({ mb_per_s: median(rates), cpu_mb_per_s: median(cpuRates), rates, cpuRates, tokens: n,
                               bytes: Buffer.byteLength(text), node: process.version, js_tiktoken: kVersion }));
  return 0;
}

// llm.c's multiple-choice eval layout: a 256 x int32 header (20240522, 1,
// examples, longest example in bytes), then per example the uint16 stream
// 65535, size in bytes, index, label, endings, context length + ids, each
// ending's length + ids.
function choices(js, enc, jsonl, out) {
  const encoder = new js.lite.Tiktoken(js.ranks(enc));
  const lines = fs.readFileSync(jsonl, "utf8").split("\n").filter((l) => l.trim() !== "");
  const words = [];
  let longest = 0;
  lines.forEach((line, idx) => {
    const ex = JSON.parse(line);
    const ctx = encoder.encode(ex.ctx, [], []);
    const ws = [65535, 0, idx, ex.label, ex.endings.length, ctx.length, ...ctx];
    for (const e of ex.endings) {
      const ids = encoder.encode(" " + e, [], []);
      ws.push(ids.length, ...ids);
    }
    ws[1] = 2 * ws.length;
    longest = Math.max(longest, ws[1]);
    words.push(...ws);
  });
  const header = new Int32Array(256);
  header.set([20240522, 1, lines.length, longest]);
  fs.writeFileSync(out, Buffer.concat([Buffer.from(header.buffer), Buffer.from(Uint16Array.from(words).buffer)]));
  return 0;
}

// Token file versions 3 (uint16) and 4 (uint32): header (20240520, version,
// count), the ids, then one bit per id, least significant first.
function sft(js, enc, jsonl, promptKey, completionKey, eot, out) {
  const encoder = new js.lite.Tiktoken(js.ranks(enc));
  const ids = [], trained = [];
  const push = (xs, t) => { for (const x of xs) { ids.push(x); trained.push(t); } };
  let afterCompletion = false;
  for (const line of fs.readFileSync(jsonl, "utf8").split("\n")) {
    if (line.trim() === "") continue;
    const ex = JSON.parse(line);
    push([eot], afterCompletion);
    push(encoder.encode(ex[promptKey], [], []), false);
    push(encoder.encode(ex[completionKey], [], []), true);
    afterCompletion = true;
  }
  if (afterCompletion) push([eot], true);
  const wide = ids.some((x) => x > 65535) || enc === "cl100k_base";
  const header = new Int32Array(256);
  header.set([20240520, wide ? 4 : 3, ids.length]);
  const body = wide ? Uint32Array.from(ids) : Uint16Array.from(ids);
  const mask = Buffer.alloc(Math.ceil(ids.length / 8));
  trained.forEach((t, i) => { if (t) mask[i >> 3] |= 1 << (i & 7); });
  fs.writeFileSync(out, Buffer.concat([Buffer.from(header.buffer), Buffer.from(body.buffer), mask]));
  return 0;
}

function main() {
  const [cmd, ...args] = process.argv.slice(2);
  const js = loadJs();
  if (cmd === "ranks") {
    const [enc, out] = args;
    fs.writeFileSync(out, mergeableRanks(js, enc).map(([r, t]) => `${t} ${r}\n`).join(""));
    return 0;
  }
  if (cmd === "compare") {
    const [enc, ranks, trainBin, sep, outDir, ...files] = args;
    return compare(js, enc, ranks, trainBin, Number(sep), outDir, files);
  }
  if (cmd === "bench") return bench(js, args[0], args[1], Number(args[2] || 5));
  if (cmd === "decode") {
    const [enc, idsFile, out] = args;
    const ids = fs.readFileSync(idsFile, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
    fs.writeFileSync(out, new js.lite.Tiktoken(js.ranks(enc)).decode(ids));
    return 0;
  }
  if (cmd === "choices") return choices(js, args[0], args[1], args[2]);
  if (cmd === "sft") return sft(js, args[0], args[1], args[2], args[3], Number(args[4]), args[5]);
  console.error("usage: js_tiktoken.cjs ranks|compare|bench|decode|choices|sft ...");
  return 2;
}

process.exit(main());
