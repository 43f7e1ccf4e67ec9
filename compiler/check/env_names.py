"""Environment variables others own: a variable name in; who sets or reads it (a phrase for a message) out, or None
when the name is free for storage.url_env.

The URL in storage.url_env is read by the script, but every other program in the worker's process tree sees the
variable too: a name the shell, the dynamic loader, Python, a numeric library, a driver or a cluster launcher uses
would feed them the URL (an ld.so warning quoting it, a --worker-index error printing it, a pod log), or be
overwritten by the launcher. Matched without regard to case (Windows and some tools fold it).
"""

from __future__ import annotations

import re

from compiler.runtime.roles import INDEX_ENVS
from compiler.runtime.workers import CPUS_ENV, THREAD_ENVS

# (owner, exact names, name prefixes), by who owns them.
_OWNERS: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = (
    ("the shell and POSIX", frozenset({
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "PWD", "OLDPWD", "TERM", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TMP",
        "TEMP", "HOSTNAME", "HOST", "IFS", "PS1", "PS2", "PS3", "PS4", "ENV", "SHLVL", "MAIL", "MAILPATH", "CDPATH",
        "DISPLAY", "EDITOR", "VISUAL", "PAGER", "COLUMNS", "LINES", "NLSPATH", "POSIXLY_CORRECT", "UID", "EUID", "PPID",
        "RANDOM", "SECONDS", "LINENO", "OPTARG", "OPTIND", "HISTFILE", "PROMPT_COMMAND", "MANPATH", "INFOPATH", "_"}),
     ("LC_", "BASH", "XDG_", "SSH_", "DBUS_", "SUDO_", "HIST")),
    ("the dynamic loader and the C library", frozenset({
        "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "NIS_PATH",
        "RES_OPTIONS", "TZDIR", "MALLOC_ARENA_MAX", "MALLOC_CHECK_"}),
     ("LD_", "DYLD_", "MALLOC_")),
    ("Python and its package tools", frozenset({"VIRTUAL_ENV", "PIPENV_ACTIVE", "PYENV_VERSION"}),
     ("PYTHON", "PIP_", "CONDA", "UV_", "POETRY_", "PYENV_")),
    ("torch, the GPU runtimes and the numeric libraries", frozenset({"CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS"}),
     ("TORCH", "PYTORCH_", "CUDA", "CUDNN_", "CUBLAS_", "NVIDIA_", "NCCL_", "HIP_", "HSA_", "ROCM", "ROCR_", "AMD_",
      "MIOPEN_", "RCCL_", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "BLIS_", "NUMEXPR_", "ORT_", "ONNX",
      "QUARK", "HF_", "TRANSFORMERS_", "TF_")),
    ("the PostgreSQL client library (libpq reads PG* itself)", frozenset(), ("PG",)),
    ("proxies and TLS", frozenset({
        "HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}), ()),
    ("Kubernetes", frozenset({"JOB_COMPLETION_INDEX"}), ("KUBERNETES_",)),
    ("SLURM", frozenset(), ("SLURM", "SBATCH_", "SRUN_", "SALLOC_")),
    ("PBS, LSF, Grid Engine and Flux", frozenset({
        "JOB_ID", "JOB_NAME", "TASK_ID", "SGE_TASK_ID", "NSLOTS", "NHOSTS", "QUEUE", "PE_HOSTFILE"}),
     ("PBS_", "LSB_", "LSF_", "SGE_", "FLUX_", "COBALT_")),
    ("MPI and distributed launchers (torchrun, Ray)", frozenset({
        "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"}),
     ("OMPI_", "PMI_", "PMIX_", "MPI_", "I_MPI_", "HYDRA_", "MV2_", "TORCHELASTIC_", "RAY_", "AWS_BATCH_")),
    ("qas's script (a worker's cores, threads and index)", frozenset({CPUS_ENV, *THREAD_ENVS, *INDEX_ENVS}),
     ("QAS_CPU",)),
)
# The variables Kubernetes injects for every Service in the namespace (FOO_SERVICE_HOST, FOO_PORT_5432_TCP, ...).
_SERVICE_LINK = re.compile(r"^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)"
                           r"(_(PROTO|PORT|ADDR))?)?)$")


def owner(name: str) -> str | None:
    """A variable name in; who else sets or reads it out ("SLURM", "the dynamic loader ..."), or None when free."""
    upper = name.upper()
    for who, names, prefixes in _OWNERS:
        if upper in names or upper.startswith(prefixes):
            return who
    if _SERVICE_LINK.match(upper):
        return "Kubernetes (a Service's link variable)"
    return None
