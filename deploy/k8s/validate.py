#!/usr/bin/python3
"""Offline checks of the Kubernetes manifests; no cluster needed. Run by validate.sh.
  validate.py [FILE...]    default: every *.yaml beside this script
  validate.py --self-test  mutates the real manifests: each mutation must be caught
Needs only Debian 12's python3-kubernetes (client 22.6, the Kubernetes 1.22 API) and python3-yaml.
1. Schema, from the client's models: every field known (a typo such as `restartPolice` would be
   dropped silently by the API server), of the declared type, required fields present (the
   models' own client-side validation), quantities well formed. YAML errors and duplicate keys.
2. A Kustomization's resources exist, and are checked as well.
3. What the training Job promises (docker/README.md): one GPU, --resume, restarts on failure,
   checkpoints on a claim, read-only data, time to checkpoint on SIGTERM, a non-root user.
4. What a data-parallel (Indexed) training Job promises: as many pods at once as ranks, RANK
   from the completion index, WORLD_SIZE the number of ranks, MASTER_ADDR pod 0's name under a
   headless Service of the same file that selects the pods and serves MASTER_PORT.
5. What the serving Deployment promises (deploy/monitoring/): its pods annotated for Prometheus to
   scrape, at the container's metrics port, where convoy serve's --metrics-port listens, /metrics.
"""
import datetime
import glob
import os
import re
import sys
import tempfile

import kubernetes
import yaml
from kubernetes import client
from kubernetes.utils import parse_quantity
from kubernetes.utils.create_from_yaml import LOWER_OR_NUM_FOLLOWED_BY_UPPER_RE, UPPER_FOLLOWED_BY_LOWER_RE

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = client.Configuration()  # client_side_validation is on: models raise ValueError on a missing required field

# Where the client's types are looser than the API's: it types quantities as plain 'str' (the API
# also takes numbers: `nvidia.com/gpu: 1`), and int-or-string fields as 'object', like free JSON.
QUANTITY_FIELDS = {
    'V1ResourceRequirements': ('limits', 'requests'), 'V1PodSpec': ('overhead',), 'V1Overhead': ('pod_fixed',),
    'V1EmptyDirVolumeSource': ('size_limit',), 'V1ResourceFieldSelector': ('divisor',),
    'V1PersistentVolumeSpec': ('capacity',), 'V1PersistentVolumeClaimStatus': ('capacity',),
    'V1LimitRangeItem': ('default', 'default_request', 'max', 'min', 'max_limit_request_ratio'),
    'V1ResourceQuotaSpec': ('hard',), 'V1ResourceQuotaStatus': ('hard', 'used'),
    'V1NodeStatus': ('allocatable', 'capacity'),
}
assert all(a in getattr(client, m).openapi_types for m, attrs in QUANTITY_FIELDS.items() for a in attrs)
# The 22.6 client checks no enum: the API's values for the enum fields these manifests use.
ENUMS = {
    ('V1PodSpec', 'restart_policy'): {'Always', 'OnFailure', 'Never'},
    ('V1Container', 'image_pull_policy'): {'Always', 'IfNotPresent', 'Never'},
    ('V1PodSecurityContext', 'fs_group_change_policy'): {'OnRootMismatch', 'Always'},
    ('V1Toleration', 'operator'): {'Exists', 'Equal'},
    ('V1Toleration', 'effect'): {'NoSchedule', 'PreferNoSchedule', 'NoExecute'},
    ('V1PersistentVolumeClaimSpec', 'access_modes'): {'ReadWriteOnce', 'ReadOnlyMany', 'ReadWriteMany',
                                                      'ReadWriteOncePod'},
    ('V1PersistentVolumeClaimSpec', 'volume_mode'): {'Filesystem', 'Block'},
}
assert all(a in getattr(client, m).openapi_types for m, a in ENUMS)
INT_OR_STRING = {'port', 'target_port', 'max_surge', 'max_unavailable', 'min_available'}  # among 'object' fields
# The API's quantity grammar (apimachinery's resource.Quantity): parse_quantity alone also takes
# "NaN", " 1", "1_000" and "1K", which the API server rejects.
QUANTITY_RE = re.compile(r'[+-]?(\d+\.?\d*|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?')
JSON_TYPE = {str: 'string', bool: 'boolean', int: 'integer', float: 'number', dict: 'object', list: 'array'}


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_quantity(v):
    if not (isinstance(v, (str, float)) or is_int(v)) or not QUANTITY_RE.fullmatch(str(v)):
        return False
    try:
        parse_quantity(v)
    except ValueError:
        return False
    return True


def is_timestamp(v):  # an unquoted YAML timestamp arrives as a datetime
    try:
        return isinstance(v, datetime.date) or bool(datetime.datetime.fromisoformat(v.replace('Z', '+00:00')))
    except (AttributeError, ValueError):
        return False


SCALARS = {  # the client's scalar types, and the two above
    'str': lambda v: isinstance(v, str), 'bool': lambda v: isinstance(v, bool), 'int': is_int,
    'float': lambda v: is_int(v) or isinstance(v, float), 'datetime': is_timestamp, 'date': is_timestamp,
    'object': lambda v: True, 'quantity': is_quantity, 'int-or-string': lambda v: is_int(v) or isinstance(v, str),
}


def dig(o, *keys):
    """o[k1][k2]..., or None where a step is missing or of another type (JavaScript's ?.)."""
    for k in keys:
        if isinstance(o, dict):
            o = o.get(k)
        elif isinstance(o, list) and is_int(k) and -len(o) <= k < len(o):
            o = o[k]
        else:
            return None
    return o


def first(*values):  # JavaScript's ??
    return next((v for v in values if v is not None), None)


def key_path(path, key):
    return f'{path}.{key}' if re.fullmatch(r'[A-Za-z0-9_-]+', str(key)) else f'{path}["{key}"]'


def model_for(api_version, kind):
    """The client's model for apiVersion + kind: what its API returns for that kind, the API class
    named as kubernetes.utils.create_from_yaml names it (batch/v1 -> BatchV1Api, v1 -> CoreV1Api)."""
    group, _, version = api_version.partition('/')
    if not version:
        group, version = 'core', group
    group = ''.join(w.capitalize() for w in ''.join(group.rsplit('.k8s.io', 1)).split('.'))
    api = getattr(client, f'{group}{version.capitalize()}Api', None)
    snake = LOWER_OR_NUM_FOLLOWED_BY_UPPER_RE.sub(r'\1_\2', UPPER_FOLLOWED_BY_LOWER_RE.sub(r'\1_\2', kind)).lower()
    for verb in ('read_namespaced_', 'read_', 'create_namespaced_', 'create_'):
        m = re.search(r':return: (\w+)', getattr(getattr(api, verb + snake, None), '__doc__', None) or '')
        if m:
            return getattr(client, m[1])
    return None


def field_type(model, attr):
    typ = model.openapi_types[attr]
    if attr in QUANTITY_FIELDS.get(model.__name__, ()):
        return typ.replace(', str)', ', quantity)') if typ.startswith('dict(') else 'quantity'
    return 'int-or-string' if typ == 'object' and attr in INT_OR_STRING else typ


def check(value, typ, path, errs):
    """Appends to errs what is wrong with value as the client's type typ ('int', 'list[V1Container]', ...)."""
    if value is None:  # null: unset
        return
    inner = re.fullmatch(r'list\[(.+)\]|dict\(str, (.+)\)', typ)
    if inner and inner[1] and isinstance(value, list):
        for i, v in enumerate(value):
            check(v, inner[1], f'{path}[{i}]', errs)
    elif inner and inner[2] and isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str):
                check(v, inner[2], key_path(path, k), errs)
            else:
                errs.append(f'{key_path(path, k)}: a key that is not a string')
    elif not inner and typ not in SCALARS and isinstance(value, dict):
        check_model(value, getattr(client, typ), path, errs)
    elif inner or not SCALARS.get(typ, lambda v: False)(value):  # a mismatched container, model or scalar
        errs.append(f'{path or "."}: expected {typ}, got {JSON_TYPE.get(type(value), type(value).__name__)} {value!r}')


def check_model(obj, model, path, errs):
    fields = {json: attr for attr, json in model.attribute_map.items()}
    given = {}
    for key, value in obj.items():
        if key not in fields:
            errs.append(f'{key_path(path, key)}: unknown field')
            continue
        check(value, field_type(model, fields[key]), key_path(path, key), errs)
        allowed = ENUMS.get((model.__name__, fields[key]))
        for i, v in enumerate(value if isinstance(value, list) else [value]):
            if allowed and isinstance(v, str) and v not in allowed:
                where = key_path(path, key) + (f'[{i}]' if isinstance(value, list) else '')
                errs.append(f'{where}: {v!r} is not one of {", ".join(sorted(allowed))}')
        if value is not None:
            given[fields[key]] = value
    # The constructor raises ValueError on the first required field that is None: give each one
    # found a stand-in ('' also passes the only other check, a base64 pattern) to find the next.
    while True:
        try:
            model(local_vars_configuration=CONFIG, **given)
            return
        except ValueError as e:
            attr = re.search(r'`(\w+)`', str(e))
            where = key_path(path, model.attribute_map.get(attr[1], attr[1])) if attr else path or '.'
            if not attr or attr[1] in given or 'must not be `None`' not in str(e):
                errs.append(f'{where}: {e}')
                return
            errs.append(f'{where}: required field missing')
            given[attr[1]] = ''


def training_job_promises(job):
    """[(kept, promise)] of the training Job (docker/README.md)."""
    pod = dig(job, 'spec', 'template', 'spec')
    c = dig(pod, 'containers', 0)
    argv = [a for key in ('command', 'args') if isinstance(dig(c, key), list) for a in dig(c, key)]
    vols = {v['name']: v for v in dig(pod, 'volumes') or [] if isinstance(dig(v, 'name'), str)}
    mount = lambda p: next((m for m in dig(c, 'volumeMounts') or [] if dig(m, 'mountPath') == p), None)
    runs, data = mount('/runs'), mount('/data')
    backoff, grace = dig(job, 'spec', 'backoffLimit'), first(dig(pod, 'terminationGracePeriodSeconds'), 30)
    uid = first(dig(pod, 'securityContext', 'runAsUser'), dig(c, 'securityContext', 'runAsUser'))
    non_root = first(dig(pod, 'securityContext', 'runAsNonRoot'), dig(c, 'securityContext', 'runAsNonRoot'))
    return [
        (dig(pod, 'restartPolicy') == 'OnFailure',
         'restartPolicy OnFailure (a crashed or stopped trainer restarts and resumes)'),
        (is_int(backoff) and backoff >= 3, 'backoffLimit >= 3 (preemptions count as failures)'),
        (is_int(grace) and grace >= 60, 'terminationGracePeriodSeconds >= 60 (time to write a checkpoint)'),
        (str(dig(c, 'resources', 'limits', 'nvidia.com/gpu')) == '1', 'a limit of nvidia.com/gpu: 1'),
        ('--resume' in argv, 'args with --resume'),
        ('--config' in argv or '-c' in argv, 'args with --config'),
        ('train' not in argv, "no 'train' in args (the image's entrypoint is `convoy train`)"),
        (runs is not None and dig(vols.get(dig(runs, 'name')), 'persistentVolumeClaim') is not None
         and not dig(runs, 'readOnly'), '/runs mounted read-write from a PersistentVolumeClaim'),
        (dig(data, 'readOnly') is True, '/data mounted read-only'),
        (non_root is True and uid != 0, 'runAsNonRoot (and not uid 0)'),
        (dig(pod, 'securityContext', 'fsGroup') is not None, 'an fsGroup, so that the runs claim is writable'),
    ]


def env_of(container):
    return {dig(e, 'name'): e for e in dig(container, 'env') or [] if isinstance(e, dict)}


def ddp_job_promises(job, services):
    """[(kept, promise)] of an Indexed training Job (train-ddp-job.yaml); services: the file's, by name."""
    spec, pod = dig(job, 'spec'), dig(job, 'spec', 'template', 'spec')
    env = env_of(dig(pod, 'containers', 0))
    value = lambda name: dig(env.get(name), 'value')
    ranks = dig(spec, 'completions')
    subdomain = dig(pod, 'subdomain')
    svc = services.get(subdomain)
    labels = dig(job, 'spec', 'template', 'metadata', 'labels') or {}
    selector = dig(svc, 'spec', 'selector') or {}
    ports = [dig(p, 'port') for p in dig(svc, 'spec', 'ports') or []]
    rank_ref = dig(env.get('RANK'), 'valueFrom', 'fieldRef', 'fieldPath')
    return [
        (is_int(ranks) and dig(spec, 'parallelism') == ranks, 'parallelism equal to completions (every rank at once)'),
        (value('WORLD_SIZE') == str(ranks), 'WORLD_SIZE equal to completions'),
        (rank_ref == "metadata.annotations['batch.kubernetes.io/job-completion-index']",
         'RANK from the completion index'),
        (value('MASTER_ADDR') == f'{dig(job, "metadata", "name")}-0.{subdomain}',
         "MASTER_ADDR naming pod 0 under the pods' subdomain"),
        (svc is not None and dig(svc, 'spec', 'clusterIP') == 'None', 'a headless Service named as the subdomain'),
        (bool(selector) and all(labels.get(k) == v for k, v in selector.items()), 'the Service selects the pods'),
        (str(value('MASTER_PORT')) in [str(p) for p in ports], 'the Service serves MASTER_PORT'),
    ]


def serve_promises(deployment):
    """[(kept, promise)] of the serving Deployment (serve.yaml): scraped by Prometheus as deploy/monitoring expects."""
    annotations = dig(deployment, 'spec', 'template', 'metadata', 'annotations') or {}
    c = dig(deployment, 'spec', 'template', 'spec', 'containers', 0)
    ports = {dig(p, 'name'): dig(p, 'containerPort') for p in dig(c, 'ports') or [] if isinstance(p, dict)}
    argv = [str(a) for a in dig(c, 'args') or []]
    listens = argv[argv.index('--metrics-port') + 1] if '--metrics-port' in argv[:-1] else '8002'  # serve's default
    return [
        (annotations.get('prometheus.io/scrape') == 'true', 'the pods annotated prometheus.io/scrape: "true"'),
        (str(annotations.get('prometheus.io/port')) == str(ports.get('metrics')) == listens,
         "prometheus.io/port the container's port named metrics, where convoy serve's --metrics-port listens"),
        (annotations.get('prometheus.io/path') == '/metrics', 'prometheus.io/path: /metrics'),
        (not any(a.replace(' ', '=') in ('--allow-metrics=false', '--allow-metrics=0') for a in argv),
         'metrics not turned off (--allow-metrics)'),
    ]


class Loader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        """Rejects duplicate keys, as kubectl does (PyYAML would keep the last one silently)."""
        seen = set()
        for k, _ in node.value:
            if isinstance(k, yaml.ScalarNode) and k.tag != 'tag:yaml.org,2002:merge':  # `<<: *x` may be overridden
                key = self.construct_object(k)
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f'duplicate key {key!r}', k.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)


def validate(files):
    """Checks each file (and the resources of kustomizations among them); returns [(passed, where, what)]."""
    results = []
    queue = [os.path.abspath(f) for f in files]
    for path in queue:  # grows as kustomizations name resources
        name = os.path.basename(path)
        try:
            with open(path) as f:
                docs = list(yaml.load_all(f, Loader))
        except yaml.MarkedYAMLError as e:
            context = f'{e.context} (line {e.context_mark.line + 1}), ' if e.context and e.context_mark else ''
            results.append((False, f'{name}:{e.problem_mark.line + 1}', f'YAML: {context}{e.problem}'))
            continue
        services, indexed_jobs = {}, []
        for doc in docs:
            if doc is None:
                continue
            if not isinstance(doc, dict):
                results.append((False, name, 'a YAML document that is not a mapping'))
                continue
            if doc.get('kind') == 'Service':
                services[dig(doc, 'metadata', 'name')] = doc
            api, kind = doc.get('apiVersion'), doc.get('kind')
            where = f'{name} {kind}/{dig(doc, "metadata", "name") or "?"}'
            if (api, kind) == ('kustomize.config.k8s.io/v1beta1', 'Kustomization'):  # not an API object
                for i, res in enumerate(doc.get('resources') or []):
                    p = os.path.abspath(os.path.join(os.path.dirname(path), str(res)))
                    p = os.path.join(p, 'kustomization.yaml') if os.path.isdir(p) else p
                    if os.path.isfile(p) and p not in queue:
                        queue.append(p)
                    results.append((os.path.isfile(p), where, f'.resources[{i}]: {res} '
                                    + ('exists (checked as well)' if os.path.isfile(p) else 'does not exist')))
                continue
            model = model_for(api, kind) if isinstance(api, str) and isinstance(kind, str) else None
            if model is None:
                results.append((False, where, f'the kubernetes client {kubernetes.__version__} has no model '
                                f'for apiVersion {api!r}, kind {kind!r}'))
                continue
            errs = []
            check_model(doc, model, '', errs)
            results += [(False, where, e) for e in errs] or [
                (True, where, f'schema ({model.__name__}): known fields, types, required fields, quantities')]
            if kind == 'Job' and dig(doc, 'metadata', 'labels', 'app.kubernetes.io/component') == 'train':
                results += [(kept, where, p if kept else f'expected {p}') for kept, p in training_job_promises(doc)]
                if dig(doc, 'spec', 'completionMode') == 'Indexed':
                    indexed_jobs.append((where, doc))
            if kind == 'Deployment' and dig(doc, 'metadata', 'labels', 'app.kubernetes.io/component') == 'serve':
                results += [(kept, where, p if kept else f'expected {p}') for kept, p in serve_promises(doc)]
        for where, job in indexed_jobs:  # once the file's Services are known
            results += [(kept, where, p if kept else f'expected {p}') for kept, p in ddp_job_promises(job, services)]
    return results


DELETE = object()


def edit(keys, value):
    """A mutation: sets the field at keys of a manifest's first document to value (or to a
    function of the old value; DELETE removes it)."""
    def apply(text):
        docs = list(yaml.safe_load_all(text))
        parent = dig(docs[0], *keys[:-1])
        if value is DELETE:
            del parent[keys[-1]]
        else:
            parent[keys[-1]] = value(parent.get(keys[-1])) if callable(value) else value
        return yaml.safe_dump_all(docs, sort_keys=False)
    return apply


POD = ('spec', 'template', 'spec')
C0 = POD + ('containers', 0)
JOB = 'train-job.yaml Job/convoy-train-fashion-mnist: '
DDP = 'train-ddp-job.yaml Job/convoy-train-ddp: '
SERVE = 'serve.yaml Deployment/convoy-serve: '
# (what, file, mutation of its text, what one of the FAILs must contain; {line} stands for the
# number of the first line that the mutation changes, {next} for the one after it)
MUTATIONS = [
    ('unknown field in the pod spec', 'train-job.yaml', edit(POD + ('restartPolice',), 'OnFailure'),
     JOB + '.spec.template.spec.restartPolice: unknown field'),
    ('a string for an int', 'train-job.yaml', edit(('spec', 'backoffLimit'), 'eight'),
     JOB + ".spec.backoffLimit: expected int, got string 'eight'"),
    ('a bad quantity', 'train-job.yaml', edit(C0 + ('resources', 'limits', 'memory'), '16Gx'),
     JOB + ".spec.template.spec.containers[0].resources.limits.memory: expected quantity, got string '16Gx'"),
    ('a label that is a number', 'train-job.yaml', edit(('metadata', 'labels', 'version'), 2),
     JOB + '.metadata.labels.version: expected str, got integer 2'),
    ('a container without a name', 'train-job.yaml', edit(C0 + ('name',), DELETE),
     JOB + '.spec.template.spec.containers[0].name: required field missing'),
    # The client requires no field of a PersistentVolumeClaim itself (one without spec passes): a nested one.
    ('a claim dataSource without kind', 'pvc.yaml', edit(('spec', 'dataSource'), {'name': 'snapshot'}),
     'pvc.yaml PersistentVolumeClaim/convoy-runs: .spec.dataSource.kind: required field missing'),
    ('an unknown imagePullPolicy', 'train-job.yaml', edit(C0 + ('imagePullPolicy',), 'IfNotPresnt'),
     JOB + ".spec.template.spec.containers[0].imagePullPolicy: 'IfNotPresnt' is not one of Always, IfNotPresent, Never"),
    ('an unknown access mode', 'pvc.yaml', edit(('spec', 'accessModes'), ['ReadWriteOne']),
     "pvc.yaml PersistentVolumeClaim/convoy-runs: .spec.accessModes[0]: 'ReadWriteOne' is not one of"),
    ('restartPolicy Never', 'train-job.yaml', edit(POD + ('restartPolicy',), 'Never'),
     JOB + 'expected restartPolicy OnFailure'),
    ('backoffLimit 2', 'train-job.yaml', edit(('spec', 'backoffLimit'), 2), JOB + 'expected backoffLimit >= 3'),
    ('no --resume', 'train-job.yaml', edit(C0 + ('args',), lambda a: [x for x in a if x != '--resume']),
     JOB + 'expected args with --resume'),
    ('/data not read-only', 'train-job.yaml', edit(C0 + ('volumeMounts', 1, 'readOnly'), DELETE),
     JOB + 'expected /data mounted read-only'),
    ('a GPU limit of 2', 'train-job.yaml', edit(C0 + ('resources', 'limits', 'nvidia.com/gpu'), 2),
     JOB + 'expected a limit of nvidia.com/gpu: 1'),
    ('running as root', 'train-job.yaml', edit(POD + ('securityContext', 'runAsUser'), 0),
     JOB + 'expected runAsNonRoot (and not uid 0)'),
    ('a kustomization resource that does not exist', 'kustomization.yaml',
     edit(('resources',), lambda r: r + ['missing.yaml']),
     'kustomization.yaml Kustomization/?: .resources[2]: missing.yaml does not exist'),
    ('a YAML syntax error', 'pvc.yaml', lambda t: t.replace('storage: 20Gi', 'storage: [20Gi'),
     'pvc.yaml:{next}: YAML: while parsing a flow sequence (line {line})'),
    ('a world size that is not the completions', 'train-ddp-job.yaml',
     lambda t: t.replace('value: "2"', 'value: "3"', 1), DDP + 'expected WORLD_SIZE equal to completions'),
    ('MASTER_ADDR not pod 0', 'train-ddp-job.yaml',
     lambda t: t.replace('value: convoy-train-ddp-0.convoy-train-ddp', 'value: convoy-train-ddp-1.convoy-train-ddp'),
     DDP + "expected MASTER_ADDR naming pod 0 under the pods' subdomain"),
    ('a Service that is not headless', 'train-ddp-job.yaml', lambda t: t.replace('clusterIP: None', 'clusterIP: ""'),
     DDP + 'expected a headless Service named as the subdomain'),
    ('serving pods not annotated for scraping', 'serve.yaml',
     lambda t: t.replace('prometheus.io/scrape: "true"', 'prometheus.io/scrape: "false"', 1),
     SERVE + 'expected the pods annotated prometheus.io/scrape: "true"'),
    ('a scrape port that is not the metrics port', 'serve.yaml',
     lambda t: t.replace('prometheus.io/port: "8002"', 'prometheus.io/port: "9102"', 1),
     SERVE + "expected prometheus.io/port the container's port named metrics"),
    ('a duplicate key', 'train-job.yaml', lambda t: t.replace('  backoffLimit: 8', '  backoffLimit: 8\n  backoffLimit: 1'),
     "train-job.yaml:{line}: YAML: duplicate key 'backoffLimit'"),
]


def self_test():
    """Validates copies of the real manifests, unchanged and then with each mutation; returns [(passed, where, what)]."""
    originals = {os.path.basename(f): open(f).read() for f in sorted(glob.glob(os.path.join(HERE, '*.yaml')))}
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        def fails(changed):
            for name, text in {**originals, **changed}.items():
                with open(os.path.join(tmp, name), 'w') as f:
                    f.write(text)
            return [f'{where}: {what}' for passed, where, what in validate([os.path.join(tmp, n) for n in originals])
                    if not passed]
        bad = fails({})
        results.append((not bad, 'self-test', 'the real manifests pass' + (': no, ' + '; '.join(bad) if bad else '')))
        for what, file, mutate, expect in MUTATIONS:
            old, new = originals[file], mutate(originals[file])
            if new == old:
                results.append((False, 'self-test', f'{what}: the mutation changes nothing in {file}'))
                continue
            line = next((i for i, (a, b) in enumerate(zip(old.splitlines(), new.splitlines()), 1) if a != b), 0)
            expect = expect.format(line=line, next=line + 1)
            got = fails({file: new})
            hit = next((f for f in got if expect in f), None)
            results.append((hit is not None, 'self-test', f'{what}: caught: FAIL {hit}' if hit
                            else f'{what}: not caught: no FAIL with {expect!r} among {got}'))
    return results


def main(args):
    if args == ['--self-test']:
        results = self_test()
    elif any(a.startswith('-') for a in args) or not all(os.path.isfile(a) for a in args):
        print('usage: validate.py [FILE...] | validate.py --self-test', file=sys.stderr)
        return 2
    else:
        results = validate(args or sorted(glob.glob(os.path.join(HERE, '*.yaml'))))
    for passed, where, what in results:
        print(f'{"ok  " if passed else "FAIL"} {where}: {what}')
    failed = sum(not passed for passed, _, _ in results)
    print(f'{len(results) - failed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
