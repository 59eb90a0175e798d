// The report's first screen, rendered from the run's verdict file (k3-run-<id>-verdict.json, written by the harness's
// RunPlan): the headline, where the run first departs from the reference, bisect's line, the counts of each part, what
// the harness catches, all as the verdict file gives them (nothing here decides, ranks or compares with a budget), and
// the trend: which layers' outcomes changed since the last run of the same engine and reference. ci/report runs it twice:
//   node report-story.mjs prepare RESULTS STORY.json [HISTORY.jsonl [LIKE.jsonl]]
//       reads the merged results folder (and the earlier runs from the history), writes STORY.json and links each
//       failing logits case to the first divergence; LIKE.jsonl gets the history's runs of the same engine and
//       reference, the only history Allure is given
//   node report-story.mjs keep STORY.json LIKE.jsonl HISTORY.jsonl
//       appends the run Allure added to LIKE.jsonl to the history, tagged with its engine and reference
//   node report-story.mjs merged MERGED.json OUT ROOT
//       k3 conform --merge ROOT's decision (its --json) as a run's verdict file in OUT, copied as it decided it
//   node report-story.mjs headline RESULTS...
//       what the first screen renders first for each results folder, one a line: the headline, a tab, the first divergence
//   node report-story.mjs inject STORY.json INDEX.html...
//       puts the story above Allure's own page in each report file (the folder's and the single file)
import { createHash, randomUUID } from "node:crypto";
import { appendFileSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

// the parts of the report (the harness's ReportPart titles), in causal order
const PART = { model: "1 · model", layers: "2 · layers", experts: "3 · experts, layer by layer", logits: "4 · logits and greedy ids", gates: "5 · engine gates", harness: "6 · harness self-tests" };

const md5 = (s) => createHash("md5").update(s).digest("hex");
const label = (r, name) => r.labels?.find((l) => l.name === name)?.value;
const failed = (r) => r.status === "failed" || r.status === "broken";

function readResults(dir) {
  const out = [];
  for (const f of readdirSync(dir)) {
    if (!f.endsWith("-result.json")) continue;
    const r = JSON.parse(readFileSync(join(dir, f), "utf8"));
    r.file = f;
    r.reportId = md5(r.uuid);
    r.part = label(r, "part");
    out.push(r);
  }
  // a re-run case (a retry) keeps only its last result, as the report does
  const byHistory = new Map();
  for (const r of out.sort((a, b) => (a.start ?? 0) - (b.start ?? 0))) byHistory.set(r.historyId ?? r.uuid, r);
  return [...byHistory.values()];
}


// a history line longer than this is no run Allure wrote: skipped unread
const HISTORY_LINE_MAX = 16 << 20;

/** Why a history line is not a run Allure wrote, or null when it is one: UTF-8 JSON of an object with a finite timestamp and testResults. */
function badHistoryLine(buf) {
  if (buf.length > HISTORY_LINE_MAX) return `${buf.length} bytes, more than ${HISTORY_LINE_MAX}`;
  let v;
  try {
    v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(buf));
  } catch (e) {
    return e instanceof TypeError ? "not UTF-8 text" : "not JSON";
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) return `a JSON ${Array.isArray(v) ? "array" : v === null ? "null" : typeof v}, not a run`;
  if (!Number.isFinite(v.timestamp)) return "no finite timestamp";
  if (v.testResults === null || typeof v.testResults !== "object" || Array.isArray(v.testResults)) return "no testResults object";
  return null;
}

/**
 * Which runs Allure may compare a run with: the engine that computed its activations and the reference it was judged
 * against. Allure's own history lines hold neither, so each line ci/report adds carries this tag (`k3`); a line
 * without it (written before the tag, or by another tool) is like no run.
 */
export const historyKey = (run) => ({ engine: run.engine, reference: run.reference });
const sameKey = (a, b) => a !== null && typeof a === "object" && a.engine === b.engine && a.reference === b.reference;

/**
 * Allure's history (one JSON data point a line), its bad lines skipped and never fatal: each is moved to
 * HISTORY.skipped (kept, not lost) and the history rewritten without it, so Allure, which reads every line, reads
 * good ones only. Returns the good lines of runs like `key` (the same engine and reference), how many other good
 * lines there are, and a note per skipped line for the report.
 */
function readHistory(historyFile, key) {
  const none = { like: [], others: 0, skipped: [] };
  if (!historyFile || !existsSync(historyFile)) return none;
  if (!statSync(historyFile).isFile()) return { ...none, skipped: [`${historyFile} is not a regular file: no history read`] };
  const all = readFileSync(historyFile);
  const good = [], bad = [], skipped = [];
  let line = 0;
  for (let at = 0; at < all.length; ) {
    let end = all.indexOf(0x0a, at);
    if (end < 0) end = all.length;
    const buf = all.subarray(at, end);
    line++;
    at = end + 1;
    if (buf.toString("latin1").trim() === "") continue;
    const why = badHistoryLine(buf);
    if (why) {
      bad.push(buf);
      skipped.push(`line ${line}: ${why}`);
    } else good.push(buf);
  }
  if (bad.length) {
    appendFileSync(`${historyFile}.skipped`, Buffer.concat(bad.flatMap((b) => [b, Buffer.from("\n")])));
    writeFileSync(`${historyFile}.tmp`, Buffer.concat(good.flatMap((b) => [b, Buffer.from("\n")])));
    renameSync(`${historyFile}.tmp`, historyFile);
  }
  const like = good.filter((b) => sameKey(JSON.parse(b.toString("utf8")).k3 ?? null, key));
  return { like, others: good.length - like.length, skipped };
}

/**
 * After Allure appended this run to the history of like runs it was given (LIKE, written by prepare): the lines it
 * added, each tagged with the run's engine and reference, appended to the history kept (HISTORY). ci/report calls it
 * only for a run whose verdict joins the history.
 */
export function keep(storyFile, likeFile, historyFile) {
  const s = JSON.parse(readFileSync(storyFile, "utf8"));
  const h = s.trend?.allureHistory;
  if (!h || !existsSync(likeFile)) throw new Error(`${storyFile}: no history of like runs to keep from ${likeFile}`);
  const added = readFileSync(likeFile, "utf8").split("\n").filter((l) => l.trim()).slice(h.like);
  for (const l of added) appendFileSync(historyFile, JSON.stringify({ ...JSON.parse(l), k3: h.key }) + "\n");
}

/**
 * The runs the trend compares, one JSON line each beside Allure's history (HISTORY.jsonl -> HISTORY.runs.jsonl): when,
 * the run, its engine, model and reference, and each layer's outcome as its verdict file gives it. Allure's own history
 * holds no engine or reference, so it cannot tell which earlier run measured the same thing.
 */
export const runsFile = (historyFile) => historyFile.replace(/(\.jsonl)?$/, ".runs.jsonl");

/** The runs kept beside the history; a line that is not one (not JSON, no engine, reference or layers) is skipped with a note. */
function readRuns(historyFile, skipped) {
  const f = historyFile ? runsFile(historyFile) : null;
  if (!f || !existsSync(f) || !statSync(f).isFile()) return [];
  const runs = [];
  readFileSync(f, "utf8").split("\n").forEach((l, i) => {
    if (!l.trim()) return;
    let v = null;
    try {
      v = JSON.parse(l);
    } catch {}
    const ok = v && typeof v === "object" && Number.isFinite(v.timestamp) && typeof v.engine === "string" && typeof v.reference === "string"
      && v.layers && typeof v.layers === "object" && !Array.isArray(v.layers);
    if (ok) runs.push(v);
    else skipped.push(`${f} line ${i + 1}: not a run of this format (the trend does not read it)`);
  });
  return runs;
}

const layerNames = (run) => Object.keys(run.layers);
const sameLayers = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * The trend: this run against the last earlier run of the same engine and reference over the same layers (like with
 * like; the model may differ: a port before and after a change), or why there is none. It lists the layers whose
 * outcome, as each run's verdict file gives it, changed: a layer that conformed and no longer does got worse, the
 * reverse got better. Ratios are shown as the verdict files give them; none is compared with a budget here.
 */
export function trendOf(run, runs) {
  const trend = { previous: null, previousModel: null, worse: [], better: [], nothing: null };
  const names = layerNames(run);
  if (names.length === 0) {
    trend.nothing = "this run judged no layer";
    return trend;
  }
  const prev = [...runs].reverse().find((p) => p.engine === run.engine && p.reference === run.reference && sameLayers(layerNames(p), names));
  if (!prev) {
    const last = runs[runs.length - 1];
    trend.nothing = runs.length === 0
      ? "no earlier run in this history"
      : `no earlier run of the same engine and reference over the same ${names.length} layers (the last, ${new Date(last.timestamp).toISOString()}, ` +
        (last.engine !== run.engine ? `was of ${last.engine}` : last.reference !== run.reference ? `was against ${last.reference}`
          : layerNames(last).length === 0 ? "judged no layer" : `judged ${layerNames(last).length} layers`) + ")";
    return trend;
  }
  trend.previous = new Date(prev.timestamp).toISOString();
  if (prev.model !== run.model) trend.previousModel = prev.model;
  for (const name of names) {
    const before = prev.layers[name], now = run.layers[name];
    const row = { name, label: now.name ?? name, uuid: now.uuid, before: before.worst_ratio_to_budget, now: now.worst_ratio_to_budget };
    if (before.conforms === true && now.conforms === false) trend.worse.push(row);
    else if (before.conforms === false && now.conforms === true) trend.better.push(row);
  }
  return trend;
}

/**
 * The runs in a results folder (only K3_RUN_ID's when set): each k3-run-<id>-plan.json and -verdict.json, and the run
 * the folder was started for (k3-run-started.json, written before anything compiled).
 */
export function runsOf(dir, only) {
  const runs = new Map();
  // only: one run's id, or a set of them (ci/report passes the runs it shows, K3_RUN_IDS)
  const shown = (id) => !only || (typeof only === "string" ? id === only : only.has(id));
  for (const f of readdirSync(dir)) {
    const m = /^k3-run-(.+)-(plan|verdict)\.json$/u.exec(f);
    if (f === "k3-run-started.json") {
      const v = readJson(join(dir, f));
      if (v.run && shown(v.run)) runs.set(v.run, { ...runs.get(v.run), started: v });
      continue;
    }
    if (!m || !shown(m[1])) continue;
    runs.set(m[1], { ...runs.get(m[1]), [m[2]]: readJson(join(dir, f)) });
  }
  return runs;
}

function readJson(f) {
  try {
    return JSON.parse(readFileSync(f, "utf8"));
  } catch (e) {
    return { unreadable: String(e.message) };
  }
}

/**
 * The verdict the report renders: the one run's verdict file, or the verdict ci/report had decided (in Java) over the
 * several runs it was given (k3-report-verdict.json); when the run wrote none (killed while compiling, a build error,
 * still running), that there is no verdict for it.
 */
export function verdictOf(runs, combined, only) {
  if (combined) return combined;
  const none = (why) => ({ outcome: "NO_VERDICT", headline: "NO VERDICT", green: false, findings: [why], not_judged: [], joins_history: false, none: true,
    first_divergence_text: "not known: the run judged nothing", bisect: "nothing to diagnose: the run judged nothing" });
  if (runs.size === 0) {
    return none(typeof only === "string" ? `no run ${only} in the results: its build failed before any gate ran, or these results are another run's`
      : "no run in the results: they come from no run of this harness");
  }
  if (runs.size > 1) throw new Error(`${runs.size} runs in one results folder and no verdict decided over them (ci/report decides one)`);
  const [[id, r]] = [...runs];
  if (!r.verdict || r.verdict.unreadable) {
    const when = r.started?.started ? `, started ${r.started.started},` : "";
    return none(`run ${id}${when} wrote no verdict: it ended before its first case (killed while compiling, a build that failed) or is still running`);
  }
  return r.verdict;
}

export function prepare(dir, storyFile, historyFile, likeFile) {
  const ids = (process.env.K3_RUN_IDS ?? "").split(" ").filter(Boolean);
  const only = ids.length ? new Set(ids) : process.env.K3_RUN_ID || null;
  const runs = runsOf(dir, only);
  const combinedFile = join(dir, "k3-report-verdict.json");
  const v = verdictOf(runs, existsSync(combinedFile) ? readJson(combinedFile) : null, only);
  const all = readResults(dir);
  // results of another run (a failed build's leftovers in a reused folder) are never shown as this run's
  const results = all.filter((r) => runs.has(label(r, "run")));
  const stale = all.length - results.length;
  for (const r of all.filter((x) => !runs.has(label(x, "run")))) rmSync(join(dir, r.file), { force: true });
  const idOf = (uuid) => (uuid ? md5(uuid) : null);

  // the trend: this run's layers as its verdict file gives them, against the last like run in the history
  const layers = Object.fromEntries(Object.entries(v.layers ?? {}).map(([k, l]) => [k, { ...l, id: idOf(l.uuid) }]));
  const run = { timestamp: Date.now(), run: [...runs.keys()].join(" "), engine: v.engine ?? "-", model: v.model ?? "-",
    reference: v.reference_manifest_sha256 ?? v.reference_dump ?? v.reference ?? "-", referenceName: v.reference_dump ?? v.reference ?? "-",
    layers: Object.fromEntries(Object.entries(v.layers ?? {}).map(([k, l]) => [k, { conforms: l.conforms, worst_ratio_to_budget: l.worst_ratio_to_budget, name: l.name }])) };
  // Allure's history read first: its bad lines are moved aside, and Allure is given the runs of the same engine and
  // reference alone (likeFile), so its history tab, trend and flaky marks never compare this run with another engine's
  const key = historyKey(run);
  const history = readHistory(historyFile, key);
  const skipped = [...history.skipped];
  const trend = historyFile ? trendOf(run, readRuns(historyFile, skipped)) : { previous: null, worse: [], better: [], nothing: null, noHistory: true };
  trend.skipped = skipped;
  if (historyFile && likeFile) {
    writeFileSync(likeFile, Buffer.concat(history.like.flatMap((b) => [b, Buffer.from("\n")])));
    trend.allureHistory = { key, like: history.like.length, others: history.others };
  }
  for (const g of [...trend.worse, ...trend.better]) g.id = layers[g.name]?.id ?? null;
  // a run its verdict keeps out of the history (INCOMPLETE, no verdict) joins neither history
  const joins = v.joins_history === true;
  if (historyFile && joins) appendFileSync(runsFile(historyFile), JSON.stringify(run) + "\n");

  const withId = (x) => ({ ...x, id: idOf(x.uuid) });
  const counts = Object.fromEntries(Object.entries(v.counts ?? {}).map(([k, c]) => [k, { ...c, skips: (c.skips ?? []).map(withId) }]));
  const first = v.first_divergence ? withId(v.first_divergence) : null;
  const s = {
    verdict: v.headline ?? v.words ?? v.outcome ?? "NO VERDICT",
    green: v.green === true,
    outcome: v.outcome,
    none: v.none === true,
    model: v.model ?? null,
    engine: v.engine ?? null,
    reference: v.reference_dump ?? v.reference ?? null,
    runs: v.runs ?? [...runs.keys()],
    findings: v.findings ?? [],
    notJudged: v.not_judged ?? [],
    judged: v.judged_count ?? null,
    planned: v.planned_count ?? null,
    finished: v.finished !== false,
    stale,
    history: joins,
    first,
    firstText: v.first_divergence_text ?? (first ? null : "not in the verdict file"),
    bisect: v.bisect ?? "not in the verdict file",
    failingLayers: (v.failing_layers ?? []).map(withId),
    counts,
    trend,
    catches: (v.catches ?? []).map(withId),
    caught: v.catches_caught ?? 0,
  };
  writeFileSync(storyFile, JSON.stringify(s, null, 2));

  // each failing logits case links to the first divergence (the symptom to its cause)
  if (first) {
    for (const r of results.filter((x) => x.part === PART.logits && failed(x))) {
      const text = "first divergence: " + first.where + (first.stage !== "-" ? " " + first.stage : "");
      r.links = [...(r.links ?? []).filter((l) => !l.name?.startsWith("first divergence")), { name: text, url: "#" + first.id, type: "link" }];
      const { file, reportId, part, ...raw } = r;
      writeFileSync(join(dir, file), JSON.stringify(raw));
    }
  }
}

const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

// a skip reason longer than this is shown cut, whole in its title: the story stays a first screen
const SKIP_REASON = 110;

function countLine(name, c, noun = "pass") {
  if (c.total === 0) return "";
  const cls = c.failed ? "k3-bad" : "k3-ok";
  // a long reason (an assumption listing every width) is cut to its first line's start; the whole is its title and on the case's page
  const short = (r) => (r.length > SKIP_REASON ? r.slice(0, SKIP_REASON).trimEnd() + " …" : r);
  const skips = c.skips.map((k) => `<a href="#${esc(k.id)}">${esc(k.name)}</a>: ${k.reason ? `<span title="${esc(k.reason)}">${esc(short(k.reason))}</span>` : "<b>no reason given</b>"}`).join("; ");
  return `<span class="${cls}" data-k3-count="${esc(name)}" data-k3-failed="${c.failed}" data-k3-total="${c.total}"><b>${esc(name)}</b> ${c.passed}/${c.total} ${noun}` +
    `${c.failed ? `, ${c.failed} fail` : ""}</span>${c.skipped ? ` <span data-k3-skipped="${c.skipped}">(${c.skipped} skipped: ${skips})</span>` : ""}`;
}

// lists longer than this show their first FOLD items and fold the rest under "and N more" (in the same order)
export const FOLD = 6;
function folded(items, attr) {
  if (items.length <= FOLD) return items.join(", ");
  return `${items.slice(0, FOLD).join(", ")} <details class="k3-more" ${attr}><summary>and ${items.length - FOLD} more</summary>${items.slice(FOLD).join(", ")}</details>`;
}

export function panel(s) {
  const f = s.first;
  const firstHtml = f ? `<a href="#${esc(f.id)}" data-k3-first>${esc(f.where)}</a> · ${esc(f.detail)}` : esc(s.firstText);
  // in layer order, as the verdict file lists them; a long list folds after the first few, never hiding an earlier layer
  const failing = s.failingLayers.length > 1
    ? ` (failing layers: ${folded(s.failingLayers.map((l) => `<a href="#${esc(l.id)}">${esc(l.name.replaceAll("\u2007", ""))}</a>`), "data-k3-failing-more")})`
    : "";
  const countsHtml = Object.keys(s.counts).length === 0 ? (s.none ? "no case ran" : "not in the verdict file")
    : Object.entries(s.counts).map(([name, n]) => (countLine(name, n) && name === "layers" ? countLine(name, n) + failing : countLine(name, n))).filter(Boolean).join(" · ");
  const t = s.trend;
  const since = t.previous ? `since the run of ${esc(t.previous)} (same engine and reference, same layers${t.previousModel ? `; its model was ${esc(t.previousModel)}` : ""})` : "";
  const rows = (list) => list.map((g) => `<a href="#${esc(g.id)}">${esc(g.label.replaceAll("\u2007", ""))}</a> ${esc(g.before ?? "-")} → ${esc(g.now ?? "-")}x budget`);
  const changed = [
    t.worse.length ? `<span class="k3-warn" data-k3-trend>${t.worse.length} layer${t.worse.length > 1 ? "s" : ""} conformed and no longer ${t.worse.length > 1 ? "do" : "does"} ${since}:</span> ` + folded(rows(t.worse), "data-k3-trend-more") : "",
    t.better.length ? `<span class="k3-ok" data-k3-trend-better>${t.better.length} layer${t.better.length > 1 ? "s" : ""} now conform${t.better.length > 1 ? "" : "s"} ${since}:</span> ` + folded(rows(t.better), "data-k3-trend-better-more") : "",
  ].filter(Boolean).join("; ");
  const trendHtml = t.noHistory
    ? `no history kept (ci/report K3_REPORT_HISTORY=FILE keeps one)`
    : t.nothing
      ? `<span data-k3-trend-nothing>nothing to compare: ${esc(t.nothing)}</span>`
      : changed || `<span data-k3-trend-same>no layer's outcome changed ${since}</span>`;
  const others = t.allureHistory?.others ?? 0;
  const othersHtml = others === 0 ? ""
    : ` <span data-k3-history-others>(${others} earlier run${others > 1 ? "s" : ""} of another engine or reference left out of this report's history)</span>`;
  const skippedHtml = (t.skipped ?? []).length === 0 ? ""
    : ` <span class="k3-warn" data-k3-history-skipped>${t.skipped.length} history line${t.skipped.length > 1 ? "s" : ""} skipped (moved to the history's .skipped file): ${esc(t.skipped.slice(0, 5).join("; "))}${t.skipped.length > 5 ? "; …" : ""}</span>`;
  const missed = s.catches.length - s.caught;
  const catchesHtml = s.catches.length === 0
    ? "no planted wrong port in this run (the mutation, experts, faults and ports gates plant them)"
    : `<details data-k3-catches><summary><span class="${missed ? "k3-bad" : "k3-ok"}">${s.catches.length} planted wrong ports, ${s.caught} caught` +
      `${missed ? `, <b>${missed} not caught</b>` : ""}</span> (show the table)</summary><table><tr><th>planted</th><th>kind</th><th>gate</th><th>layer</th><th>stage</th><th>category</th><th>ratio to budget</th></tr>` +
      s.catches.map((c) => `<tr class="${c.caught ? "" : "k3-miss"}"><td><a href="#${esc(c.id)}">${esc(c.planted)}</a></td><td>${esc(c.kind)}</td><td>${esc(c.gate)}</td><td>${c.layer === null || c.layer === undefined ? "-" : "L" + esc(c.layer)}</td>` +
        `<td>${esc(c.stage ?? "-")}</td><td>${c.caught ? esc(c.category) : `${c.category ? esc(c.category) + " " : ""}<b>NOT CAUGHT</b> (its case fails)`}</td><td>${esc(c.ratio_to_budget ?? "-")}</td></tr>`).join("") +
      "</table></details>";
  // a headline that is not green shows what it rests on when the first divergence does not: what was not judged, or the findings
  const says = s.notJudged.length
    ? `planned but not judged: ${s.notJudged.length}${s.planned !== null ? ` of ${s.planned}` : ""} (${s.notJudged.join(", ")})` +
      (s.finished ? "" : "; the run did not end: interrupted, killed or crashed")
    : s.findings.join("; ");
  const who = s.engine || s.model
    ? `<span class="k3-model">${esc(s.engine ?? "")}${s.model ? ` (${esc(s.model)})` : ""}${s.reference ? ` against ${esc(s.reference)}` : ""}</span>` : "";
  return `<section id="k3-story" data-verdict="${esc(s.verdict)}">
<div class="k3-head"><span class="k3-verdict ${s.green ? "k3-ok" : "k3-bad"}" data-k3-verdict>${esc(s.verdict)}</span>
${who}</div>
<dl>
${!s.green && says && (s.notJudged.length || s.none || !s.first) ? `<dt class="k3-keep">${s.notJudged.length || s.none ? "not judged" : "findings"}</dt><dd class="k3-keep k3-bad" data-k3-missing>${esc(says)}</dd>` : ""}
${s.stale ? `<dt>left out</dt><dd data-k3-stale>${s.stale} result${s.stale > 1 ? "s" : ""} of another run (not this run's plan)</dd>` : ""}
<dt class="k3-keep">first divergence</dt><dd class="k3-keep" data-k3-first-divergence>${firstHtml}</dd>
<dt>bisect</dt><dd data-k3-bisect>${esc(s.bisect)}</dd>
<dt>counts</dt><dd data-k3-counts>${countsHtml}</dd>
<dt>trend</dt><dd data-k3-trend-line>${trendHtml}${othersHtml}${skippedHtml}</dd>
<dt>the harness catches</dt><dd>${catchesHtml}</dd>
</dl>
</section>
<script>
  // on a case's page (the report's hash route) the story shrinks to the verdict and the first divergence
  (() => { const s = document.getElementById("k3-story"), f = () => s.classList.toggle("k3-compact", location.hash.length > 1); addEventListener("hashchange", f); f(); })();
</script>`;
}

const STYLE = `<style id="k3-story-style">
#k3-story{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;margin:12px auto 0;padding:14px 20px;border-radius:8px;background:#fff;border:1px solid #d0d7de;color:#1f2328}
#k3-story .k3-head{display:flex;align-items:baseline;gap:16px;flex-wrap:wrap}
#k3-story .k3-verdict{font-size:28px;font-weight:700;letter-spacing:.02em}
#k3-story .k3-model{color:#57606a}
#k3-story dl{display:grid;grid-template-columns:130px 1fr;gap:4px 12px;margin:10px 0 0}
#k3-story dt{color:#57606a}#k3-story dd{margin:0}
#k3-story .k3-bad{color:#c62828}#k3-story .k3-ok{color:#1b7f3b}#k3-story .k3-warn{color:#b35c00;font-weight:600}
#k3-story a{color:#0550ae}
#k3-story details table{border-collapse:collapse;margin-top:6px;font-size:12px;width:100%}#k3-story td,#k3-story th{border:1px solid #d0d7de;padding:2px 6px;text-align:left}
#k3-story tr.k3-miss td{background:#fde2e1}#k3-story summary{cursor:pointer}
#k3-story.k3-compact{display:flex;align-items:baseline;gap:16px;padding:6px 20px;margin-top:6px}
#k3-story.k3-compact .k3-verdict{font-size:18px}#k3-story.k3-compact .k3-model{display:none}
#k3-story.k3-compact dl{margin:0;display:flex;gap:8px}#k3-story.k3-compact dl>:not(.k3-keep){display:none}
#app article[class*="styles_chart__"]{display:none!important}
#app header{position:static!important}
#k3-story details.k3-more{display:inline}#k3-story details.k3-more[open]{display:block}#k3-story details.k3-more summary{display:inline;color:#0550ae}
#k3-file-banner{font:14px/1.45 system-ui,sans-serif;max-width:1100px;margin:12px auto 0;padding:10px 20px;border-radius:8px;background:#fff4e5;border:1px solid #b35c00;color:#1f2328}
</style>`;

// the folder copy loads its data by fetch, which file:// forbids: said at once instead of a spinner that never stops
const FILE_BANNER = `<script>
  if (location.protocol === "file:") document.addEventListener("DOMContentLoaded", () => {
    const b = document.createElement("div"); b.id = "k3-file-banner"; b.setAttribute("data-k3-file-banner", "");
    b.innerHTML = "This folder copy of the report loads its data over HTTP and cannot open from file://. Open the single file beside it, <a href='../" +
      location.pathname.split("/").slice(-2, -1)[0] + ".html'>" + location.pathname.split("/").slice(-2, -1)[0] + ".html</a>, or serve this folder (python3 -m http.server -d FOLDER).";
    document.body.prepend(b);
  });
</script>`;

/**
 * The harness's results are deterministic: a status that changes between runs is a change of inputs, not a flaky
 * test. Allure marks a failure flaky when its history holds a pass after an earlier failure; the mark (and the
 * flaky counts) are taken out of the report's data, the folder's files and the single file's embedded copies alike.
 */
const unflake = (json) => json.replace(/"flaky":true/g, '"flaky":false').replace(/,"flaky":\d+/g, "").replace(/"flaky":\d+,/g, "");
function deflakeFolder(dir) {
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) deflakeFolder(p);
    else if (f.endsWith(".json")) {
      const t = readFileSync(p, "utf8"), u = unflake(t);
      if (u !== t) writeFileSync(p, u);
    }
  }
}
const deflakeSingle = (page) => page.replace(/d\("([^"]+\.json)","([A-Za-z0-9+/=]+)"\)/g, (m, name, b64) => {
  const t = Buffer.from(b64, "base64").toString("utf8"), u = unflake(t);
  return u === t ? m : `d("${name}","${Buffer.from(u, "utf8").toString("base64")}")`;
});

function inject(storyFile, files) {
  const s = JSON.parse(readFileSync(storyFile, "utf8"));
  const html = panel(s);
  for (const f of files) {
    // the folder copy (its index.html beside widgets/, and data/ when there are results or history) loads its data over
    // HTTP; a run without results (no verdict) has no data/ yet is a folder copy all the same
    const folder = existsSync(join(f, "..", "data")) || existsSync(join(f, "..", "widgets"));
    if (folder) deflakeFolder(join(f, ".."));
    let page = readFileSync(f, "utf8");
    if (!page.includes('<div id="app"></div>')) throw new Error(`${f}: no <div id="app"></div> to put the story above`);
    // the story above Allure's app, whose pass-rate ring (a percentage as the headline) it hides; Allure's page-view beacon (an external script) removed: a report opens offline
    page = page.replace(/<script async src="https:\/\/www\.googletagmanager\.com[\s\S]*?<\/script>\s*<script>[\s\S]*?gtag\('config'[\s\S]*?<\/script>/, "");
    page = page.replace("</head>", `${STYLE}\n</head>`).replace('<div id="app"></div>', `${html}\n<div id="app"></div>`);
    page = page.replace(/<title>[^<]*<\/title>/, `<title>${esc(s.verdict)} · k3j conformance</title>`);
    page = folder ? page.replace("</head>", `${FILE_BANNER}\n</head>`) : deflakeSingle(page);
    writeFileSync(f, page);
  }
}

/**
 * k3 conform --merge ROOT's own decision (its --json) as one more run's verdict file in OUT: copied as it decided it,
 * its words the headline, never re-mapped here; the merge is no run of its own to keep in the history.
 */
export function merged(jsonFile, out, where) {
  const m = JSON.parse(readFileSync(jsonFile, "utf8"));
  const decided = m?.verdict;
  if (decided === null || typeof decided !== "object" || Array.isArray(decided) || !("outcome" in decided)) {
    throw new Error(`k3 conform --merge ${where} wrote no verdict object`);
  }
  const run = "merge-" + randomUUID().slice(0, 12);
  const verdict = { ...decided, run, headline: decided.words, joins_history: false, model: where };
  writeFileSync(join(out, `k3-run-${run}-plan.json`), JSON.stringify({ format: "k3-plan", run, checkpoint: true, merge: where, shards: m.shards ?? [] }));
  writeFileSync(join(out, `k3-run-${run}-verdict.json`), JSON.stringify(verdict));
}

/** What the first screen renders first for each results folder, one line a folder: the headline, a tab, the first divergence line. */
function headline(dirs) {
  for (const dir of dirs) {
    const storyFile = join(dir, "k3-story.json");
    prepare(dir, storyFile, null);
    const s = JSON.parse(readFileSync(storyFile, "utf8"));
    rmSync(storyFile);
    const html = panel(s), text = (re) => re.exec(html)[1].replace(/<[^>]*>/g, "");
    process.stdout.write(text(/data-k3-verdict>([^<]*)</) + "\t" + text(/data-k3-first-divergence>(.*?)<\/dd>/s) + "\n");
  }
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === "prepare") prepare(args[0], args[1], args[2], args[3]);
else if (cmd === "keep") keep(args[0], args[1], args[2]);
else if (cmd === "merged") merged(args[0], args[1], args[2]);
else if (cmd === "headline") headline(args);
else if (cmd === "inject") inject(args[0], args.slice(1));
else if (cmd) {
  console.error("usage: report-story.mjs prepare RESULTS STORY.json [HISTORY.jsonl [LIKE.jsonl]] | keep STORY.json LIKE.jsonl HISTORY.jsonl | merged MERGED.json OUT ROOT | headline RESULTS... | inject STORY.json INDEX.html...");
  process.exit(2);
}
