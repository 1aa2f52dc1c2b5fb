# One rule per DVC stage: input = its dependencies (as other stages' outputs) and its stamp,
# output = its outputs, the command = its cmd, resources from `resources.<kind>` of the parameter
# file. A changed value of the params keys the stage reads, or a changed command, reruns it
# through its stamp (rules/common.smk, params_stamp), which knows what `dvc repro` ran since, not
# through Snakemake's `params` trigger, which the workflow's own profile turns off
# (profiles/default): that compared `values` and `cmd` below with Snakemake's last run alone. They
# stay in `params` as they were, so metadata written by earlier rules stays that of these.
# The command travels in `params`: those are evaluated here, in the loop, while `shell:` is only
# evaluated when a job runs, after the loop has ended. The parameter file reaches the command as
# S2S_PARAMS in the jobs' environment (the default of a stage's `s2s --params`; rules/common.smk),
# not in `params`: Snakemake compares a rule's params with those it last ran with where its
# `params` trigger is on (`--rerun-triggers params`), and the file's
# name is no value a stage reads (`--config params=profiles/x.yaml`, then a plain run, reran every
# job). S2S_JOB_GPUS tells the stage how many GPUs
# its job asked for: on a local machine it claims that many free ones for itself (s2s.device),
# under SLURM the scheduler has already given them. S2S_JOB_THREADS is the threads Snakemake gave
# the job (a rule's threads, cut to --cores on a local run): a data stage starts no more
# processes than that (s2s.data.stream.workers_for). The timing stage measures decoding speed, so
# nothing may run beside it: it takes every core of a local run (Snakemake starts no other job
# while one holds them all) and a node of its own under SLURM.

# The cores the run was given (--cores); None for a cluster run, which is given jobs, not cores
# (`workflow.cores` raises there, however the executor is chosen).
_local_cores = workflow.resource_settings.cores

for _stage in STAGES:
    _res = PARAMS.resources_for(_stage.kind)
    _gpu_site = _res.gpus and config["gpu_partition"]
    _site = {"slurm_partition": config["gpu_partition"]} if _gpu_site else {}
    _alone = _stage.kind == "timing"
    if _alone:
        _site["slurm_extra"] = "'--exclusive'"

    rule:
        name:
            _stage.rule
        input:
            stage_inputs(_stage),
            stamp=params_stamp(_stage),
        output:
            stage_outputs(_stage),
        log:
            f"logs/{_stage.rule}.log",
        params:
            cmd=_stage.cmd,
            record=record_params(_stage),
            values=dag.param_values(PARAM_VALUES, _stage.params),
        threads: max(_local_cores or 0, _res.threads) if _alone else _res.threads
        resources:
            mem_mb=_res.mem_mb,
            runtime=_res.runtime,
            gpu=_res.gpus,
            **_site,
        shell:
            "S2S_JOB_GPUS={resources.gpu} S2S_JOB_THREADS={threads} {params.cmd} > {log} 2>&1"
            " && {params.record}"
