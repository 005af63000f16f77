"""Ray Serve applications.

`conceptual.serve.app` is the captioning service: a FastAPI ingress (`app.Api`) in front of
the model deployments (`captioner_deployment.CaptionerDeployment`, which serves the
registry's champion captioner and follows the alias with `champion.Champion`, and
`retriever_deployment.RetrieverDeployment`, a retriever per search key of the family
registry). Its arguments are `config.ServeConfig`; its routes, one table, `routes`; reading
request bodies and their guards, `uploads`. The HTTP API's bodies and errors are in
`schema`; `config.yaml` runs it with `serve run`.
"""
