"""Checks samplab's twinkle shapes against twinkle's own dataclasses (twinkle.data_format).

The dataclasses below restate twinkle's SampleResponse and SamplingParams; JSON is loaded into
them strictly: an unknown or missing key, or a value of the wrong type, fails. Run by
tests/suite/twinkle.rs on the real binary's output:

  check.py response --prompt P --samples N [--models M] [--logprobs] [--prompt-logprobs] < JSON
  check.py export --expect PARAMS_JSON --expect-vllm TO_VLLM_JSON < SNIPPET
  check.py params   (prints SamplingParams mappings as twinkle's asdict writes them)
"""

import argparse
import ast
import collections.abc
import dataclasses
import json
import sys
import types
from dataclasses import dataclass, field
from typing import List, Literal, Optional, Sequence, Union, get_args, get_origin, get_type_hints

StopReason = Literal["length", "stop"]


@dataclass
class Message:
    role: Literal["system", "user", "assistant", "tool"]
    content: str


@dataclass
class Trajectory:
    messages: List[Message] = field(default_factory=list)


@dataclass
class SampleResponse:
    trajectories: List[Trajectory]
    logprobs: Optional[List[List[float]]] = None
    prompt_logprobs: Optional[List[List[float]]] = None
    stop_reason: Optional[List[StopReason]] = None


@dataclass
class SamplingParams:
    max_tokens: Optional[int] = None
    seed: Optional[int] = None
    stop: Union[str, Sequence[str], Sequence[int], None] = None
    temperature: float = 1.0
    top_k: int = -1
    top_p: float = 1.0
    repetition_penalty: float = 1.0

    def to_vllm(self, *, num_samples: int = 1, logprobs: bool = True, prompt_logprobs: int = 0):
        """What twinkle passes on besides the fields: its own keyword arguments, checked."""
        expect(isinstance(num_samples, int) and num_samples >= 1, f"num_samples={num_samples!r}")
        expect(isinstance(logprobs, bool), f"logprobs={logprobs!r} is not a bool")
        expect(isinstance(prompt_logprobs, int), f"prompt_logprobs={prompt_logprobs!r}")
        return {"num_samples": num_samples, "logprobs": logprobs, "prompt_logprobs": prompt_logprobs}

    def to_transformers(self, tokenizer=None):
        expect(tokenizer is not None, "to_transformers without a tokenizer")
        return {}


class Failure(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Failure(message)


def load(tp, value, path):
    """`value` (parsed JSON) as type `tp`, or Failure naming the path of the first mismatch."""
    if dataclasses.is_dataclass(tp):
        expect(isinstance(value, dict), f"{path}: expected an object, got {value!r}")
        hints = get_type_hints(tp)
        fields = {f.name: f for f in dataclasses.fields(tp)}
        unknown = sorted(set(value) - set(fields))
        expect(not unknown, f"{path}: keys twinkle's {tp.__name__} does not have: {unknown}")
        missing = [
            name
            for name, f in fields.items()
            if name not in value
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        expect(not missing, f"{path}: missing {missing}")
        return tp(**{k: load(hints[k], v, f"{path}.{k}") for k, v in value.items()})
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union:
        if value is None:
            expect(type(None) in args, f"{path}: null is not allowed")
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return load(option, value, path)
            except Failure as e:
                errors.append(str(e))
        raise Failure(" / ".join(errors))
    if origin in (list, collections.abc.Sequence):
        expect(isinstance(value, list), f"{path}: expected a list, got {value!r}")
        return [load(args[0], v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is Literal:
        expect(value in args, f"{path}: {value!r} is not one of {args}")
        return value
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        expect(ok, f"{path}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        expect(ok, f"{path}: expected an int, got {value!r}")
        return value
    if tp is str:
        expect(isinstance(value, str), f"{path}: expected a string, got {value!r}")
        return value
    raise Failure(f"{path}: no rule for {tp}")


def check_response(response, args, path):
    n = args.samples
    expect(len(response.trajectories) == n, f"{path}: {len(response.trajectories)} trajectories")
    for i, trajectory in enumerate(response.trajectories):
        roles = [m.role for m in trajectory.messages]
        expect(roles == ["user", "assistant"], f"{path}.trajectories[{i}]: roles {roles}")
        prompt = trajectory.messages[0].content
        expect(prompt == args.prompt, f"{path}.trajectories[{i}]: prompt {prompt!r}")
    expect(response.stop_reason is not None and len(response.stop_reason) == n,
           f"{path}.stop_reason: {response.stop_reason}")
    if args.logprobs:
        expect(response.logprobs is not None and len(response.logprobs) == n,
               f"{path}.logprobs: {response.logprobs}")
        for i, (trajectory, logprobs) in enumerate(zip(response.trajectories, response.logprobs)):
            expect(all(lp <= 0 for lp in logprobs), f"{path}.logprobs[{i}]: {logprobs}")
            expect(bool(logprobs) or not trajectory.messages[1].content,
                   f"{path}.logprobs[{i}]: empty beside text")
    else:
        expect(response.logprobs is None, f"{path}.logprobs: not asked, got {response.logprobs}")
    if args.prompt_logprobs:
        lists = response.prompt_logprobs
        expect(lists is not None and len(lists) == n, f"{path}.prompt_logprobs: {lists}")
        expect(lists[0] and all(lp <= 0 for lp in lists[0]), f"{path}.prompt_logprobs[0]: {lists[0]}")
        expect(all(l == lists[0] for l in lists), f"{path}.prompt_logprobs: not one list repeated")
    else:
        expect(response.prompt_logprobs is None, f"{path}.prompt_logprobs: not asked")


def response_command(args):
    value = json.load(sys.stdin)
    if args.models > 1:
        expect(isinstance(value, list) and len(value) == args.models,
               f"expected an array of {args.models} responses")
        items = value
    else:
        items = [value]
    for m, item in enumerate(items):
        path = f"response[{m}]" if args.models > 1 else "response"
        check_response(load(SampleResponse, item, path), args, path)


def calls(tree, name):
    """Calls of `name(...)` or `x.name(...)` in `tree`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called == name:
                found.append(node)
    return found


def fake_modules():
    """twinkle.data_format and transformers as far as the snippet uses them."""
    twinkle = types.ModuleType("twinkle")
    data_format = types.ModuleType("twinkle.data_format")
    data_format.SamplingParams = SamplingParams
    twinkle.data_format = data_format
    transformers = types.ModuleType("transformers")

    class AutoTokenizer:
        @staticmethod
        def from_pretrained(model_id):
            expect(isinstance(model_id, str), f"model_id={model_id!r}")
            return object()

    transformers.AutoTokenizer = AutoTokenizer
    return {"twinkle": twinkle, "twinkle.data_format": data_format, "transformers": transformers}


def export_command(args):
    source = sys.stdin.read()
    tree = ast.parse(source)
    fields = {f.name for f in dataclasses.fields(SamplingParams)}
    constructors = calls(tree, "SamplingParams")
    expect(len(constructors) == 1, f"{len(constructors)} SamplingParams(...) calls")
    expect(not constructors[0].args, "SamplingParams(...) takes positional arguments")
    named = [k.arg for k in constructors[0].keywords]
    expect(set(named) <= fields, f"SamplingParams(...) names {sorted(set(named) - fields)}")
    allowed = {"to_vllm": {"num_samples", "logprobs", "prompt_logprobs"},
               "to_transformers": {"tokenizer"}}
    for method, keywords in allowed.items():
        found = calls(tree, method)
        expect(len(found) == 1, f"{len(found)} {method}(...) calls")
        names = {k.arg for k in found[0].keywords}
        expect(names <= keywords, f"{method}(...) names {sorted(names - keywords)}")

    sys.modules.update(fake_modules())
    scope = {}
    exec(compile(tree, "<export>", "exec"), scope)
    params = scope["params"]
    expect(isinstance(params, SamplingParams), "params is not a SamplingParams")
    expected = load(SamplingParams, json.loads(args.expect), "expected")
    expect(params == expected, f"params {params} != {expected}")
    vllm = json.loads(args.expect_vllm)
    expect(scope["vllm_params"] == vllm, f"to_vllm got {scope['vllm_params']} != {vllm}")


def params_command(_args):
    """Mappings twinkle writes for its SamplingParams (dataclasses.asdict), for presets."""
    examples = [
        SamplingParams(),
        SamplingParams(max_tokens=64, seed=7, stop=["\n\n", "The End"], temperature=0.7,
                       top_k=40, top_p=0.9, repetition_penalty=1.1),
        SamplingParams(stop="\n\n"),
        SamplingParams(stop=[13, 2], temperature=0),
    ]
    print(json.dumps([dataclasses.asdict(p) for p in examples]))


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    response = commands.add_parser("response")
    response.add_argument("--prompt", required=True)
    response.add_argument("--samples", type=int, required=True)
    response.add_argument("--models", type=int, default=1)
    response.add_argument("--logprobs", action="store_true")
    response.add_argument("--prompt-logprobs", action="store_true")
    response.set_defaults(run=response_command)
    export = commands.add_parser("export")
    export.add_argument("--expect", required=True)
    export.add_argument("--expect-vllm", required=True)
    export.set_defaults(run=export_command)
    commands.add_parser("params").set_defaults(run=params_command)
    args = parser.parse_args()
    try:
        args.run(args)
    except Failure as e:
        print(f"not twinkle's shape: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
