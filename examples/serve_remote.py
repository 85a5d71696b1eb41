"""`transformers serve` for a folder or Hub repo with custom code, such as an export of this family (docs/serving.md):

    python examples/serve_remote.py serve path/or/repo --trust-remote-code [--continuous-batching ...]

The stock CLI, with two fixes (transformers 5.24):

- It looks the model class up as an attribute of `transformers` (`ModelManager._load_model`), where a remote-code
  class is not: this puts the folder's class there.
- A chat request (`/v1/chat/completions`, `/v1/responses`) to a model whose tokenizer has no chat template fails
  inside `apply_chat_template` and answers HTTP 500 `Internal Server Error`: this answers 400 with the reason, as
  the server answers other bad requests (`{"detail": "..."}`).

Needs `transformers[serving]` (fastapi, uvicorn, openai).
"""

import sys

from fastapi import HTTPException
from transformers import AutoConfig
from transformers.cli.serving import model_manager
from transformers.cli.serving.chat_completion import ChatCompletionHandler
from transformers.cli.serving.response import ResponseHandler
from transformers.cli.transformers import main as transformers_cli
from transformers.dynamic_module_utils import get_class_from_dynamic_module


def _needs_chat_template(resolve_model):
    """The handler's `_resolve_model`, refusing a model whose tokenizer has no chat template (and none was given in
    `chat_template_kwargs`, the server's `--chat-template-kwargs` or the request's) before anything is generated."""

    def checked(self, body: dict):
        model_id, model, processor = resolve_model(self, body)
        given = {**self.chat_template_kwargs, **(body.get("chat_template_kwargs") or {})}.get("chat_template")
        if not (given or getattr(processor, "chat_template", None)):
            raise HTTPException(
                status_code=400,
                detail=f"The tokenizer of {body['model']} has no chat template, so this endpoint cannot turn messages "
                "into a prompt: send the text to /v1/completions, or give the tokenizer a template "
                "(tokenizer.chat_template = ...; tokenizer.save_pretrained(folder)).",
            )
        return model_id, model, processor

    return checked


def main() -> None:
    for handler in (ChatCompletionHandler, ResponseHandler):  # the two that apply the chat template
        handler._resolve_model = _needs_chat_template(handler._resolve_model)
    path = sys.argv[sys.argv.index("serve") + 1]
    config = AutoConfig.from_pretrained(path, trust_remote_code=True)
    cls = get_class_from_dynamic_module(config.auto_map["AutoModelForCausalLM"], path)
    # the module object the serve model manager reads the class from (importing transformers' modeling code can
    # replace sys.modules["transformers"] with a new lazy module, so an attribute set on an earlier
    # `import transformers` is lost)
    setattr(model_manager.transformers, config.architectures[0], cls)
    transformers_cli()


if __name__ == "__main__":
    main()
