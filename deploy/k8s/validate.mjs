// Offline checks of the Kubernetes manifests; no cluster needed. Run by validate.sh.
//   node validate.mjs [--typed DIR] FILE...
// 1. Schema: each document against the API's OpenAPI schema (npm kubernetes-models): types,
//    required fields, enums, quantities (nvidia.com/gpu included).
// 2. Unknown fields (a typo such as `restartPolice` would be dropped silently by the API server):
//    with --typed DIR, DIR/<file>.json holds kubectl's typed round-trip of FILE's workloads; every
//    field of the input must have survived it.
// 3. What the training Job promises (docker/README.md): one GPU, --resume, restarts on failure,
//    checkpoints on a claim, read-only data, time to checkpoint on SIGTERM, a non-root user.
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Service } from 'kubernetes-models/v1/Service';

const kinds = {
  'batch/v1/Job': Job,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
};
const notKubernetes = new Set(['kustomize.config.k8s.io/v1beta1/Kustomization']);

let failures = 0;
let checked = 0;
const fail = (where, msg) => { failures++; console.log(`FAIL ${where}: ${msg}`); };
const ok = (where, msg) => { checked++; console.log(`ok   ${where}: ${msg}`); };

const args = process.argv.slice(2);
let typedDir = null;
if (args[0] === '--typed') { typedDir = args[1]; args.splice(0, 2); }

// Every leaf of `input` must be in `typed` with the same value (scalars compared as text:
// kubectl writes quantities as strings).
function missingLeaves(input, typed, at = '') {
  if (input === null || typeof input !== 'object') {
    return String(input) === String(typed) ? [] : [`${at} (${JSON.stringify(input)} became ${JSON.stringify(typed)})`];
  }
  if (typed === null || typeof typed !== 'object') return [`${at} (dropped)`];
  const out = [];
  for (const [k, v] of Object.entries(input)) {
    const p = Array.isArray(input) ? `${at}[${k}]` : `${at}.${k}`;
    if (!(k in typed)) { out.push(`${p} (unknown field, dropped)`); continue; }
    out.push(...missingLeaves(v, typed[k], p));
  }
  return out;
}

function checkTrainingJob(where, job) {
  const spec = job.spec ?? {};
  const pod = spec.template?.spec ?? {};
  const c = (pod.containers ?? [])[0] ?? {};
  const argv = [...(c.command ?? []), ...(c.args ?? [])];
  const expect = (cond, msg) => (cond ? ok(where, msg) : fail(where, `expected ${msg}`));
  expect(pod.restartPolicy === 'OnFailure', 'restartPolicy OnFailure (a crashed or stopped trainer restarts and resumes)');
  expect(Number.isInteger(spec.backoffLimit) && spec.backoffLimit >= 3, 'backoffLimit >= 3 (preemptions count as failures)');
  expect((pod.terminationGracePeriodSeconds ?? 30) >= 60, 'terminationGracePeriodSeconds >= 60 (time to write a checkpoint)');
  expect(String(c.resources?.limits?.['nvidia.com/gpu']) === '1', 'a limit of nvidia.com/gpu: 1');
  expect(argv.includes('--resume'), 'args with --resume');
  expect(argv.includes('--config') || argv.includes('-c'), 'args with --config');
  expect(!argv.includes('train'), "no 'train' in args (the image's entrypoint is `convoy train`)");
  const vols = Object.fromEntries((pod.volumes ?? []).map((v) => [v.name, v]));
  const mount = (p) => (c.volumeMounts ?? []).find((m) => m.mountPath === p);
  const runs = mount('/runs');
  expect(runs && vols[runs.name]?.persistentVolumeClaim && !runs.readOnly, '/runs mounted read-write from a PersistentVolumeClaim');
  const data = mount('/data');
  expect(data && data.readOnly === true, '/data mounted read-only');
  const uid = pod.securityContext?.runAsUser ?? c.securityContext?.runAsUser;
  expect((pod.securityContext?.runAsNonRoot ?? c.securityContext?.runAsNonRoot) === true && uid !== 0,
         'runAsNonRoot (and not uid 0)');
  expect(pod.securityContext?.fsGroup !== undefined, 'an fsGroup, so that the runs claim is writable');
}

for (const file of args) {
  const name = path.basename(file);
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'));
  let typed = null;
  if (typedDir && fs.existsSync(path.join(typedDir, `${name}.json`))) {
    const t = JSON.parse(fs.readFileSync(path.join(typedDir, `${name}.json`), 'utf8'));
    typed = t.kind === 'List' ? t.items : [t];
  }
  let w = 0;
  for (const doc of docs) {
    if (doc.errors.length) { fail(name, doc.errors.map((e) => e.message).join('; ')); continue; }
    const o = doc.toJS();
    if (!o) continue;
    const key = `${o.apiVersion}/${o.kind}`;
    const where = `${name} ${o.kind}/${o.metadata?.name ?? '?'}`;
    if (notKubernetes.has(key)) { ok(where, 'not an API object; kubectl kustomize builds it'); continue; }
    const Model = kinds[key];
    if (!Model) { fail(where, `no schema here for ${key}: add it to validate.mjs`); continue; }
    try { new Model(o).validate(); ok(where, 'schema'); } catch (e) { fail(where, `schema: ${e.message}`); }
    if (o.spec?.template) {  // workloads: kubectl's typed round-trip covers them
      if (typedDir && !typed?.[w]) {
        fail(where, 'no typed round-trip from kubectl');
      } else if (typed) {
        const t = typed[w];
        const lost = missingLeaves(o, t).filter((p) => !p.startsWith('.status'));
        if (lost.length) fail(where, `not in the typed object: ${lost.join(', ')}`);
        else ok(where, 'no unknown fields (kubectl typed round-trip)');
      }
      w++;
    }
    if (o.kind === 'Job' && o.metadata?.labels?.['app.kubernetes.io/component'] === 'train') checkTrainingJob(where, o);
  }
}
console.log(`${checked} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
