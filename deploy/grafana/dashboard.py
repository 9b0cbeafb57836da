#!/usr/bin/env python3
"""dashboard.py - the kvtier Grafana dashboard, generated with grafanalib.

    python3 dashboard.py > kvtier-dashboard.json

The JSON is committed (import it in Grafana, or provision it); the test
deploy_grafana regenerates it with the pinned grafanalib (REQUIREMENTS)
and fails if the committed file differs, and deploy_prometheus_server has a
real Prometheus evaluate every panel's query against a real kvtierd.
Queries use the recording rules of deploy/prometheus/kvtier-rules.yml
where one exists.  Variables: $job and $instance (multi, "All").

The engine's connector (kvtier.vllm) exports no Prometheus series of its
own yet, so there is no engine row: vLLM's own metrics (its
vllm:external_prefix_cache_* counters) can be added beside these.
"""
import json
import sys

from grafanalib._gen import DashboardEncoder
from grafanalib.core import (
    BYTES_FORMAT, BYTES_PER_SEC_FORMAT, OPS_FORMAT, PERCENT_UNIT_FORMAT, SECONDS_FORMAT,
    SHORT_FORMAT, Dashboard, DataSourceInput, GridPos, Heatmap, RowPanel, Stat, Target,
    Template, Templating, TimeSeries, YAxis,
)

REQUIREMENTS = ["grafanalib==0.7.1", "attrs==26.1.0"]
DS = "${DS_PROMETHEUS}"
SEL = 'job=~"$job",instance=~"$instance"'


class Layout:
    """Panels left to right, 24 units wide, rows of the given height."""

    def __init__(self):
        self.x = self.y = 0
        self.h = 0
        self.panels = []

    def row(self, title):
        if self.x:
            self.y += self.h
        self.x, self.h = 0, 1
        self.panels.append(RowPanel(title=title, gridPos=GridPos(h=1, w=24, x=0, y=self.y)))
        self.y += 1
        self.h = 0

    def add(self, panel, w, h=8):
        if self.x + w > 24:
            self.x = 0
            self.y += self.h
            self.h = 0
        panel.gridPos = GridPos(h=h, w=w, x=self.x, y=self.y)
        self.x += w
        self.h = max(self.h, h)
        self.panels.append(panel)


def ts(title, exprs, unit=SHORT_FORMAT, desc=None, stack=False):
    targets = [Target(expr=e, legendFormat=l, refId=chr(65 + i), datasource=DS)
               for i, (e, l) in enumerate(exprs)]
    return TimeSeries(title=title, dataSource=DS, targets=targets, unit=unit,
                      description=desc, stacking={"mode": "normal"} if stack else {})


def stat(title, expr, unit=SHORT_FORMAT, desc=None):
    return Stat(title=title, dataSource=DS, description=desc, format=unit,
                targets=[Target(expr=expr, refId="A", datasource=DS)], reduceCalc="last")


def heatmap(title, op):
    return Heatmap(
        title=title, dataSource=DS, dataFormat="tsbuckets", hideZeroBuckets=True,
        description=f"kvtier_request_duration_seconds for {op}s, every serving tier",
        yAxis=YAxis(format=SECONDS_FORMAT),
        targets=[Target(expr=f'sum by (le) (rate(kvtier_request_duration_seconds_bucket{{{SEL},op="{op}"}}[$__rate_interval]))',
                        format="heatmap", legendFormat="{{le}}", refId="A", datasource=DS)])


def build():
    L = Layout()
    L.row("Overview")
    L.add(stat("servers up", f'sum(up{{{SEL}}})'), 4, 4)
    L.add(stat("hit ratio", f'avg(kvtier:hit_ratio:rate5m{{{SEL}}})', PERCENT_UNIT_FORMAT,
               "reads served by DRAM or SSD over reads, 5 m"), 4, 4)
    L.add(stat("reads/s", f'sum(kvtier:reads:rate5m{{{SEL}}})', OPS_FORMAT), 4, 4)
    L.add(stat("connections", f'sum(kvtier_connections_active{{{SEL}}})'), 4, 4)
    L.add(stat("network in", f'sum(kvtier:server_bytes_in:rate5m{{{SEL}}})',
               BYTES_PER_SEC_FORMAT), 4, 4)
    L.add(stat("memory of --max-memory", f'max(kvtier:memory_used_ratio{{{SEL}}})',
               PERCENT_UNIT_FORMAT), 4, 4)

    L.row("Tiers")
    L.add(ts("hit ratio by tier", [(f'kvtier:tier_hit_ratio:rate5m{{{SEL}}}', "{{instance}} {{tier}}"),
                                   (f'kvtier:hit_ratio:rate5m{{{SEL}}}', "{{instance}} server")],
             PERCENT_UNIT_FORMAT), 12)
    L.add(ts("hits and misses by tier", [(f'sum by (tier) (kvtier:tier_hits:rate5m{{{SEL}}})', "{{tier}} hits"),
                                         (f'sum by (tier) (kvtier:tier_misses:rate5m{{{SEL}}})', "{{tier}} misses")],
             OPS_FORMAT), 12)
    L.add(ts("bytes by tier", [(f'sum by (tier) (kvtier:tier_bytes_in:rate5m{{{SEL}}})', "{{tier}} in"),
                               (f'sum by (tier) (kvtier:tier_bytes_out:rate5m{{{SEL}}})', "{{tier}} out")],
             BYTES_PER_SEC_FORMAT), 8)
    L.add(ts("evictions by tier", [(f'sum by (tier) (kvtier:tier_evictions:rate5m{{{SEL}}})', "{{tier}}")],
             OPS_FORMAT), 8)
    L.add(ts("capacity used", [(f'kvtier:tier_used_ratio{{{SEL}}}', "{{instance}} {{tier}}")],
             PERCENT_UNIT_FORMAT, "used bytes over capacity, per tier"), 8)
    L.add(ts("capacity", [(f'sum(kvtier_dram_capacity_bytes{{{SEL}}})', "dram"),
                          (f'sum(kvtier_ssd_capacity_bytes{{{SEL}}})', "ssd"),
                          (f'sum(kvtier_dram_blocks{{{SEL}}})', "dram blocks"),
                          (f'sum(kvtier_ssd_blocks{{{SEL}}})', "ssd blocks")], BYTES_FORMAT), 12)
    L.add(ts("SSD write-down backlog", [(f'kvtier_ssd_writedown_pending_bytes{{{SEL}}}', "{{instance}}"),
                                        (f'rate(kvtier_ssd_writedown_shed_total{{{SEL}}}[$__rate_interval])', "{{instance}} shed/s")],
             BYTES_FORMAT), 12)

    L.row("Latency")
    L.add(heatmap("read latency", "read"), 12)
    L.add(heatmap("write latency", "write"), 12)
    L.add(ts("p50 by op and serving tier", [(f'kvtier:request_duration_seconds:p50_5m{{{SEL}}} > 0', "{{op}} {{tier}}")],
             SECONDS_FORMAT), 12)
    L.add(ts("p99 by op and serving tier", [(f'kvtier:request_duration_seconds:p99_5m{{{SEL}}} > 0', "{{op}} {{tier}}")],
             SECONDS_FORMAT), 12)

    L.row("SSD health")
    L.add(stat("segments quarantined", f'sum(kvtier_ssd_segments_quarantined{{{SEL}}})'), 6, 4)
    L.add(stat("degraded (ENOSPC)", f'max(kvtier_ssd_degraded{{{SEL}}})'), 6, 4)
    L.add(ts("SSD errors", [(f'rate(kvtier_ssd_io_errors_total{{{SEL}}}[$__rate_interval])', "{{instance}} I/O"),
                            (f'rate(kvtier_ssd_crc_errors_total{{{SEL}}}[$__rate_interval])', "{{instance}} CRC"),
                            (f'rate(kvtier_ssd_enospc_total{{{SEL}}}[$__rate_interval])', "{{instance}} ENOSPC")],
             OPS_FORMAT), 12, 4)

    L.row("Tenants")
    L.add(ts("requests by tenant", [(f'topk(10, sum by (tenant) (kvtier:tenant_requests:rate5m{{{SEL}}}))', "{{tenant}}")],
             OPS_FORMAT), 8)
    L.add(ts("bytes in by tenant", [(f'topk(10, sum by (tenant) (kvtier:tenant_bytes_in:rate5m{{{SEL}}}))', "{{tenant}}")],
             BYTES_PER_SEC_FORMAT), 8)
    L.add(ts("bytes out by tenant", [(f'topk(10, sum by (tenant) (kvtier:tenant_bytes_out:rate5m{{{SEL}}}))', "{{tenant}}")],
             BYTES_PER_SEC_FORMAT), 8)

    L.row("Server and cluster")
    L.add(ts("errors by kind", [(f'sum by (kind) (kvtier:errors:rate5m{{{SEL}}})', "{{kind}}"),
                                (f'sum(kvtier:errors:rate5m{{{SEL}}})', "all")], OPS_FORMAT), 8)
    L.add(ts("connections", [(f'kvtier_connections_active{{{SEL}}}', "{{instance}}"),
                             (f'kvtier_loop_connections{{{SEL}}}', "{{instance}} loop {{loop}}")]), 8)
    L.add(ts("memory of --max-memory", [(f'kvtier:memory_used_ratio{{{SEL}}}', "{{instance}}")],
             PERCENT_UNIT_FORMAT), 8)
    L.add(ts("cluster members", [(f'kvtier_cluster_members{{{SEL}}}', "{{instance}}")]), 12)
    L.add(ts("etcd reachable", [(f'kvtier_cluster_etcd_up{{{SEL}}}', "{{instance}}")],
             desc="only with kvtierd --etcd"), 12)

    return Dashboard(
        title="kvtier", uid="kvtier-overview", tags=["kvtier"], timezone="utc",
        description="kvtierd: tiers, latency, SSD health, tenants, cluster (doc/deploy.md)",
        inputs=[DataSourceInput(name="DS_PROMETHEUS", label="Prometheus", pluginId="prometheus",
                                pluginName="Prometheus")],
        templating=Templating(list=[
            Template(name="job", label="job", dataSource=DS, query="label_values(kvtier_up, job)",
                     includeAll=True, multi=True, default="$__all"),
            Template(name="instance", label="instance", dataSource=DS,
                     query='label_values(kvtier_up{job=~"$job"}, instance)', includeAll=True,
                     multi=True, default="$__all"),
        ]),
        panels=L.panels,
    ).auto_panel_ids()


def main():
    json.dump(build().to_json_data(), sys.stdout, cls=DashboardEncoder, indent=2,
              sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
