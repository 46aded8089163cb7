"""PLACEHOLDER — being replaced by the VPS implementation (SPEC §8)."""
def privacy_metrics(task, events):
    return {"vps": 0.0, "per_target_vps": [0.0] * task.num_agents}
