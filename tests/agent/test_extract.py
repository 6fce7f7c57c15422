from drkernel.agent.extract import extract_code, strip_thinking

KERNEL = """import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass
"""
MODEL = """import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return x
"""
FULL = KERNEL + "\n" + MODEL


def test_answer_block_wins_over_other_blocks():
    text = f"Draft:\n```python\n{MODEL.replace('return x', 'return -x')}```\n<answer>\n```python\n{FULL}```\n</answer>"
    ex = extract_code(text)
    assert ex.ok and ex.method == "answer_block"
    assert "@triton.jit" in ex.code and "return -x" not in ex.code


def test_last_modelnew_block_is_taken():
    text = f"```python\n{FULL.replace('return x', 'return 1')}```\nbetter:\n```python\n{FULL}```\n"
    ex = extract_code(text)
    assert ex.method == "fenced" and "return x" in ex.code and "return 1" not in ex.code


def test_kernels_in_separate_block_are_joined():
    text = f"Kernel:\n```python\n{KERNEL}```\nModel:\n```python\n{MODEL}```\nRun it with:\n```bash\npython x.py\n```"
    ex = extract_code(text)
    assert ex.method == "fenced+kernels"
    assert ex.code.index("@triton.jit") < ex.code.index("class ModelNew")
    assert "python x.py" not in ex.code


def test_thinking_text_is_ignored():
    text = f"<think>maybe\n```python\nclass ModelNew: broken(\n```\n</think>\n```python\n{FULL}```"
    assert strip_thinking("<think>a</think>b") == "b"
    assert strip_thinking("a</think>b") == "b"
    assert strip_thinking("b<think>unfinished") == "b"
    ex = extract_code(text)
    assert ex.ok and "broken(" not in ex.code


def test_unterminated_fence_from_a_truncated_answer():
    ex = extract_code(f"Here it is:\n```python\n{FULL}")
    assert ex.method == "unterminated_fence" and "class ModelNew" in ex.code


def test_missing_fences_take_the_longest_parseable_code():
    text = f"Sure! Here is the code.\n{FULL}\nThis kernel is fast because it fuses ops."
    ex = extract_code(text)
    assert ex.method == "unfenced"
    assert ex.code.startswith("import triton") and "fuses ops" not in ex.code
    compile(ex.code, "<x>", "exec")


def test_unparseable_answers_are_classified():
    assert extract_code("").reason == "empty"
    assert extract_code("I cannot help with that.").reason == "no_code"
    no_model = extract_code(f"```python\n{KERNEL}```")
    assert not no_model.ok and no_model.reason == "no_modelnew" and no_model.message
