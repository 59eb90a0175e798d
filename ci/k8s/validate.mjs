// Validates the Kubernetes manifests of ci/k8s offline against the batch/v1 Job schema of the kubernetes-models
// package (pinned by ci/package-lock.json), plus what the shard run needs of them: an Indexed Job whose
// K3_SHARD_COUNT equals its completions, backoffLimitPerIndex, the checkpoint mounted read-only, --shard auto; a
// merge Job's --digests naming the manifest a digest Job's --out writes.
// Prints K3_SHARD_COUNT's value (for the CI step's JOB_COMPLETION_INDEX run). Exit 1 with the reasons when not.
//   node ci/k8s/validate.mjs ci/k8s/conform-indexed-job.yaml ci/k8s/digest-job.yaml ci/k8s/merge-job.yaml
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { Job } from "kubernetes-models/batch/v1/Job";

// the batch/v1 JobSpec's fields (Kubernetes 1.33): the schema leaves unknown keys open, the API server's strict
// field validation does not, so a misspelt one (paralelism) is refused here too
const JOB_SPEC = new Set(["activeDeadlineSeconds", "backoffLimit", "backoffLimitPerIndex", "completionMode", "completions", "managedBy",
  "manualSelector", "maxFailedIndexes", "parallelism", "podFailurePolicy", "podReplacementPolicy", "selector", "successPolicy", "suspend",
  "template", "ttlSecondsAfterFinished"]);
const bad = [];
let count = null;
const digestsOut = [], digestsIn = [];
for (const file of process.argv.slice(2)) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (doc.errors.length) { bad.push(`${file}: ${doc.errors[0].message}`); continue; }
    const obj = doc.toJS();
    if (obj?.kind !== "Job" || obj?.apiVersion !== "batch/v1") { bad.push(`${file}: not a batch/v1 Job`); continue; }
    try {
      new Job(obj).validate();
    } catch (e) {
      bad.push(`${file}: ${e.message}`);
      continue;
    }
    const spec = obj.spec, pod = spec.template.spec, c = pod.containers[0];
    for (const k of Object.keys(spec)) if (!JOB_SPEC.has(k)) bad.push(`${file}: spec.${k} is not a field of a batch/v1 Job`);
    if (c.args[0] === "digest") digestsOut.push(c.args[c.args.indexOf("--out") + 1]);
    if (c.args.includes("--merge")) {
      const i = c.args.indexOf("--digests");
      if (i < 0) bad.push(`${file}: the merge has no --digests (the checkpoint's digest manifest)`);
      else digestsIn.push(`${file}:${c.args[i + 1]}`);
    }
    if (!c.args.includes("--shard")) continue; // the merge or digest Job
    const env = Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));
    if (spec.completionMode !== "Indexed") bad.push(`${file}: completionMode is not Indexed`);
    if (!(spec.backoffLimitPerIndex >= 0)) bad.push(`${file}: no backoffLimitPerIndex`);
    if (pod.restartPolicy !== "Never") bad.push(`${file}: backoffLimitPerIndex needs restartPolicy Never`);
    if (c.args[c.args.indexOf("--shard") + 1] !== "auto") bad.push(`${file}: the shard is not --shard auto`);
    if (String(spec.completions) !== env.K3_SHARD_COUNT) bad.push(`${file}: K3_SHARD_COUNT ${env.K3_SHARD_COUNT} is not the Job's completions ${spec.completions}`);
    const ro = pod.volumes.find((v) => v.name === "checkpoint");
    const mount = c.volumeMounts.find((m) => m.name === "checkpoint");
    if (!ro?.persistentVolumeClaim?.readOnly || !mount?.readOnly) bad.push(`${file}: the checkpoint volume is not mounted read-only`);
    count = env.K3_SHARD_COUNT;
  }
}
if (count === null) bad.push("no Indexed Job with --shard among the manifests");
for (const d of digestsIn) {
  const [file, path] = [d.slice(0, d.indexOf(":")), d.slice(d.indexOf(":") + 1)];
  if (!digestsOut.includes(path)) bad.push(`${file}: --digests ${path} is written by no digest Job among the manifests (${digestsOut.join(", ") || "none"})`);
}
if (bad.length) {
  for (const b of bad) console.error(`ci/k8s/validate: ${b}`);
  process.exit(1);
}
console.log(count);
