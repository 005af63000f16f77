"""infra/ (image, compose file, KubeRay manifests, cluster launcher config) agrees with the code
it deploys. Nothing is deployed here: no Docker, Kubernetes or network; the files are parsed and
compared with the source tree."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
INFRA = REPO / "infra"
YAML_FILES = sorted(INFRA.rglob("*.yaml"))
CODE_DIRS = ("platform", "pipelines", "jobs", "serve")

# Variables infra sets or mentions that the platform's code does not read, and who reads them.
THIRD_PARTY_VARIABLES = {
    "MINIO_ROOT_USER": "MinIO",
    "MINIO_ROOT_PASSWORD": "MinIO",
    "MLFLOW_S3_ENDPOINT_URL": "the MLflow server (its S3 artifact store)",
    "MLFLOW_DISABLE_TELEMETRY": "MLflow",
    "RAY_AUTH_MODE": "Ray",
    "RAY_AUTH_TOKEN": "Ray",
    "RAY_HEAD_IP": "Ray's cluster launcher (worker start commands)",
    "DEBIAN_FRONTEND": "apt-get",
    "UV_COMPILE_BYTECODE": "uv",
    "PYTHONUNBUFFERED": "Python",
    "TORCH_INDEX": "infra/Dockerfile (a build argument)",
    "STRICT_SPREAD": "Ray Train (a value of placement_strategy=, not a variable)",
}
# What the platform's jobs need on every Ray node of a cluster.
PLATFORM_VARIABLES = {
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "MLFLOW_TRACKING_URI",
}
# MLflow, the front door (nginx before Serve), Ray, MinIO API, console; never Serve itself.
COMPOSE_PORTS = {"5000", "8080", "8265", "9000", "9001"}


def infra_texts() -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(INFRA.rglob("*")) if path.is_file()}


def load_yaml(path: Path) -> list[dict]:
    return list(yaml.safe_load_all(path.read_text()))


def kuberay_resources() -> list[dict]:
    return [doc for path in sorted((INFRA / "kuberay").glob("*.yaml")) for doc in load_yaml(path)]


def ray_cluster_specs() -> dict[str, dict]:
    """Every Ray cluster the manifests describe, by resource (`RayJob/conceptual-curate`)."""
    where = {"RayCluster": (), "RayJob": ("rayClusterSpec",), "RayService": ("rayClusterConfig",)}
    specs = {}
    for resource in kuberay_resources():
        if resource["kind"] not in where:  # the front door's Deployment and Service
            continue
        spec = resource["spec"]
        for key in where[resource["kind"]]:
            spec = spec[key]
        specs[f"{resource['kind']}/{resource['metadata']['name']}"] = spec
    return specs


def pod_specs(cluster: dict) -> list[dict]:
    groups = [cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])]
    return [group["template"]["spec"] for group in groups]


def pinned_version(package: str) -> str:
    """The version pyproject.toml pins `package` to (`name==X` or `name[extras]==X`)."""
    pyproject = (REPO / "pyproject.toml").read_text()
    match = re.search(rf'"{re.escape(package)}(?:\[[^\]]*\])?==([^";\s]+)"', pyproject)
    assert match, f"pyproject.toml pins no {package} version"
    return match.group(1)


def variables_the_code_reads() -> set[str]:
    read = re.compile(
        r"""(?:environ\.get|environ\.setdefault|getenv)\(\s*["']([A-Z][A-Z0-9_]*)["']"""
        r"""|environ\[\s*["']([A-Z][A-Z0-9_]*)["']\s*\]"""
        r"""|_ENV\s*=\s*["']([A-Z][A-Z0-9_]*)["']"""  # a name kept in a constant: X_ENV = "..."
    )
    names = set()
    for folder in CODE_DIRS:
        for path in (REPO / folder).rglob("*.py"):
            names.update(a or b or c for a, b, c in read.findall(path.read_text()))
    return names


def module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(INFRA)))
def test_yaml_files_parse(path):
    documents = load_yaml(path)
    assert documents and all(isinstance(doc, dict) for doc in documents)


def test_modules_run_with_python_m_exist():
    modules = {
        (path.relative_to(REPO), module)
        for path, text in infra_texts().items()
        for module in re.findall(r"python -m (conceptual[\w.]*\w)", text)
    }
    assert any(module == "conceptual.jobs.curate" for _, module in modules)
    missing = sorted(f"{path}: {module}" for path, module in modules if not module_exists(module))
    assert not missing, f"no such module: {missing}"


def test_every_folder_of_modules_is_a_package_setup_py_lists():
    """setup.py lists the packages from the tree; a folder of modules without an __init__.py
    would be left out of every install (the image's, a user's pip install)."""
    spec = importlib.util.spec_from_file_location("setup_script", REPO / "setup.py")
    setup_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup_script)
    folders = {
        ".".join((name, *path.parent.relative_to(REPO / root).parts))
        for name, root in setup_script.PACKAGE_DIRS.items()
        for path in (REPO / root).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    listed = set(setup_script.packages(REPO))
    assert "conceptual.pipelines.families.attend" in listed
    assert folders <= listed, f"folders of modules that are no package: {folders - listed}"
    assert re.search(r"^COPY setup\.py ", (INFRA / "Dockerfile").read_text(), re.M)


def test_environment_variables_are_read_by_the_code_or_a_named_tool():
    read_by_code = variables_the_code_reads()
    assert PLATFORM_VARIABLES <= read_by_code  # else the grep above lost its way
    unknown = sorted(
        f"{path.relative_to(REPO)}: {name}"
        for path, text in infra_texts().items()
        for name in set(re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b", text))
        if name not in read_by_code and name not in THIRD_PARTY_VARIABLES
    )
    assert not unknown, f"variables nothing reads (a typo, or add the reader): {unknown}"


def test_compose_publishes_on_localhost_and_wires_every_ray_node():
    (compose,) = load_yaml(INFRA / "compose.yaml")
    services = compose["services"]
    published = {}  # host port -> host address
    for service in services.values():
        for port in service.get("ports", []):
            host_ip, host_port, _ = str(port).split(":")
            published[host_port] = host_ip
    assert COMPOSE_PORTS <= published.keys() and "8000" not in published
    assert set(published.values()) == {"127.0.0.1"}, published
    ray_nodes = {n: s for n, s in services.items() if s.get("command", "").startswith("ray start")}
    assert len(ray_nodes) >= 2  # a head and a worker
    for name, service in ray_nodes.items():
        assert PLATFORM_VARIABLES <= service["environment"].keys(), name


def test_image_installs_the_debian_packages_setup_installs():
    """The image hands requirements/apt.txt itself to apt-get, so the two lists cannot drift."""
    dockerfile = (INFRA / "Dockerfile").read_text()
    copied = re.search(r"^COPY requirements/apt\.txt (\S+)$", dockerfile, re.M)
    assert copied, "the Dockerfile does not copy requirements/apt.txt"
    install = re.search(r"^RUN (?:.*\\\n)*.*apt-get install.*$", dockerfile, re.M)
    assert install, "the Dockerfile installs no Debian packages"
    assert copied.group(1) in install.group(0), "apt-get install does not read apt.txt"


def test_image_and_clusters_run_the_pinned_versions():
    dockerfile = (INFRA / "Dockerfile").read_text()
    assert f"torch=={pinned_version('torch')}" in dockerfile
    ray = pinned_version("ray")
    versions = {name: spec.get("rayVersion") for name, spec in ray_cluster_specs().items()}
    assert set(versions.values()) == {ray}, versions


def test_kuberay_clusters_autoscale_and_give_every_pod_the_platform_env():
    for name, cluster in ray_cluster_specs().items():
        assert cluster["enableInTreeAutoscaling"] is True, name
        for group in cluster["workerGroupSpecs"]:
            sizes = group["minReplicas"], group["replicas"], group["maxReplicas"]
            assert sizes[0] <= sizes[1] <= sizes[2], (name, group["groupName"], sizes)
        env_sources = [c.get("envFrom") for pod in pod_specs(cluster) for c in pod["containers"]]
        assert env_sources[0] and all(e == env_sources[0] for e in env_sources), name


def test_gpu_training_jobs_fit_their_cluster():
    gpu_jobs = [
        r
        for r in kuberay_resources()
        if r["kind"] == "RayJob" and "use_gpu=true" in r["spec"]["entrypoint"]
    ]
    assert gpu_jobs
    for job in gpu_jobs:
        workers = int(re.search(r"\bworkers=(\d+)", job["spec"]["entrypoint"]).group(1))
        capacity = sum(
            group["maxReplicas"] * int(container["resources"]["limits"].get("nvidia.com/gpu", 0))
            for group in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
            for container in group["template"]["spec"]["containers"]
        )
        assert capacity >= workers, (job["metadata"]["name"], workers, capacity)


def test_cluster_launcher_config_follows_rays_schema():
    import jsonschema

    (config,) = load_yaml(INFRA / "cluster.yaml")
    ray_dir = Path(importlib.util.find_spec("ray").submodule_search_locations[0])
    schema = json.loads((ray_dir / "autoscaler" / "ray-schema.json").read_text())
    jsonschema.validate(config, schema)
    assert config["head_node_type"] in config["available_node_types"]


def rayservice_serve_config() -> dict:
    (service,) = [r for r in kuberay_resources() if r["kind"] == "RayService"]
    return yaml.safe_load(service["spec"]["serveConfigV2"])


def test_rayservice_listens_beyond_the_pod():
    assert rayservice_serve_config()["http_options"]["host"] == "0.0.0.0"


def test_rayservice_runs_the_applications_of_serve_config_yaml():
    path = REPO / "serve" / "config.yaml"
    if not path.is_file():
        pytest.skip("serve/config.yaml does not exist yet")
    serve_config = yaml.safe_load(path.read_text())
    assert rayservice_serve_config()["applications"] == serve_config["applications"]


def test_every_front_door_is_the_one_template_filled_in():
    """compose and KubeRay run nginx through conceptual.serve.front_door (the one template,
    serve/nginx.conf.template), pointed at Serve; no copy of an nginx.conf in infra/."""
    (compose,) = load_yaml(INFRA / "compose.yaml")
    [deployment] = [r for r in kuberay_resources() if r["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    commands = [
        compose["services"]["front-door"]["command"].split(),
        [*container["command"], *container["args"]],
    ]
    for command in commands:
        assert command[:3] == ["python", "-m", "conceptual.serve.front_door"]
        assert any(arg.startswith("upstream=") and arg.endswith(":8000") for arg in command)
    assert not [p for p in INFRA.rglob("*") if "nginx" in p.name]
