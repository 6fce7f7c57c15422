"""CUDA C++ solutions (``language: cuda``): the contract, the host's sandboxed and cached build, CPU mode.

    contract       the solution's ``load_inline`` calls resolved from the source; loader arguments, the
                   Python held to the Triton contract with those calls masked
    source_rules   what the C++ may contain (hack codes 7, 8, 9, 14, 15, 16), own ``__global__`` kernels
    toolchain      compilers, torch's headers, the two rendered files (torch-free)
    messages       the compile child's job and reply
    compile_child  ``python -m drkernel.gym.cuda.compile_child``: one build inside the sandbox
    build          `Compiler` and `CompileCache`: content-addressed, host-written, single flight
    loader         the candidate's ``load_inline``: imports the build the job handed over by the key of
                   its real arguments, never compiles; each extension call an own launch
    attribution    device activity attributed to own kernels by function name; the decoy rule
    wording        a CUDA result's hack messages and lazy warning in CUDA's terms
    evaluate       `CudaEvaluator`: the ``language``-aware front of an evaluator; on a GPU it hands the
                   builds to the in-process gym (`drkernel.gym.messages.NativeBuild`)
"""
