"""The captioning service on Ray Serve: a FastAPI ingress (`Api`) in front of the model
deployments: the champion captioners (`ServeConfig.captioners`: the family table's
captioning keys, English by default; conceptual.serve.captioner_deployment) and, opt-in
(`ServeConfig.retrievers`: the family table's search keys), the champion retrievers with
their indexes (conceptual.serve.retriever_deployment).

    serve run serve/config.yaml                  # import_path conceptual.serve.app:build_app
    url = start(ServeConfig(), port=8000)        # from Python: http://127.0.0.1:8000

The service's arguments are conceptual.serve.config's ServeConfig; its routes, one table,
conceptual.serve.routes; receiving bodies and the guards against hostile clients,
conceptual.serve.uploads. Header size and time, connections per client: the nginx front
door in front (conceptual.serve.front_door).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, TypeVar

from fastapi import FastAPI
from ray import serve
from ray.serve import Application, Deployment

from conceptual.pipelines.families import Serving, captionings, searches
from conceptual.runtime import init_ray
from conceptual.serve.captioner_deployment import CaptionerDeployment
from conceptual.serve.champion import ChampionSettings
from conceptual.serve.config import API_MAX_ONGOING_REQUESTS, ServeConfig
from conceptual.serve.retriever_deployment import RetrieverDeployment
from conceptual.serve.routes import Handles, make_api
from conceptual.tracking import tracking_uri

APP_NAME = "captioning"

S = TypeVar("S", bound=ChampionSettings)


@serve.deployment(
    name="Api",
    num_replicas=1,
    ray_actor_options={"num_cpus": 0.1},  # it only parses requests and awaits the models
    # Awaiting is cheap: let requests queue at the model replicas. Above
    # ServeConfig.max_in_flight, so that health checks never wait behind model requests.
    max_ongoing_requests=API_MAX_ONGOING_REQUESTS,
)
@serve.ingress()
class Api:
    def __init__(self, config: ServeConfig, handles: Handles):
        self.config, self.handles = config, handles

    def __serve_build_asgi_app__(self) -> FastAPI:  # Serve builds the app in each replica
        return make_api(self.config, self.handles)


def tracked(settings: S) -> S:
    """`settings` with the tracking URI resolved here, once: every replica reads the same."""
    if settings.tracking_uri is not None:
        return settings
    return settings.model_copy(update={"tracking_uri": tracking_uri()})


def bound(
    deployment: Deployment,
    table: Mapping[str, Serving],
    keys: list[str],
    settings: S,
    options: Mapping[str, Any] | None,
) -> dict[str, Application]:
    """A `deployment` per key, named by its entry in the family `table`, given `settings`."""
    settings = tracked(settings)
    return {
        key: deployment.options(name=table[key].deployment, **(options or {})).bind(settings, key)
        for key in keys
    }


def build(
    config: ServeConfig,
    captioner_options: Mapping[str, Any] | None = None,
    retriever_options: Mapping[str, Any] | None = None,
) -> Application:
    """The application; `captioner_options` and `retriever_options` are Serve deployment
    options for every captioner and retriever (autoscaling_config, num_replicas,
    ray_actor_options...) over their defaults."""
    captioners = bound(
        CaptionerDeployment, captionings(), config.captioners, config.captioning, captioner_options
    )
    retrievers = bound(
        RetrieverDeployment, searches(), config.retrievers, config.retrieval, retriever_options
    )
    return Api.bind(config, Handles(captioners=captioners, retrievers=retrievers))


def build_app(args: dict[str, Any]) -> Application:
    """The import path of serve/config.yaml; `args` are a ServeConfig."""
    return build(ServeConfig.model_validate(args))


def start(
    config: ServeConfig | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    blocking: bool = False,
    captioner_options: Mapping[str, Any] | None = None,
) -> str:
    """Deploys the application on this process's Ray (a local one unless RAY_ADDRESS says
    otherwise), HTTP on host:port, and returns its base URL once its replicas are up. With
    `blocking`, serves until Ctrl-C, then deletes the application."""
    init_ray()
    serve.start(http_options={"host": host, "port": port})
    app = build(config or ServeConfig(), captioner_options)
    serve.run(app, name=APP_NAME, route_prefix="/")
    url = f"http://{host}:{port}"
    if blocking:
        print(f"captioning at {url} (API docs at {url}/docs); Ctrl-C stops", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            serve.delete(APP_NAME)
    return url
