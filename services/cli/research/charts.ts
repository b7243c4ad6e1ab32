/** Figure 7-style charts: vega-lite spec → SVG (vega, headless) → PNG (resvg). */
import { compile, type TopLevelSpec } from "vega-lite";
import { parse, View } from "vega";
import { Resvg } from "@resvg/resvg-js";
import type { RunScore } from "../../../actors/sim/scoring.ts";

/** What the charts draw of a system's run: its name, headline figures and windows (a report's `SystemSummary` is one). */
export type ChartedSystem = Pick<RunScore, "sloViolationRatio" | "fid" | "windows"> & { name: string };

const FONT = "DejaVu Sans";

/** Demand, FID and SLO violation ratio over time, one line per system. */
export function timeSeriesSpec(systems: readonly ChartedSystem[], title: string): TopLevelSpec {
  const rows = systems.flatMap((s) =>
    s.windows.map((w) => ({ system: s.name, t: w.startMs / 1000, fid: w.fid, violation: w.sloViolationRatio })),
  );
  const demand = (systems[0]?.windows ?? []).map((w) => ({ t: w.startMs / 1000, demand: w.demandQps }));
  const x = { field: "t", type: "quantitative", title: "time (s)" } as const;
  const color = { field: "system", type: "nominal", sort: systems.map((s) => s.name), legend: { orient: "right" } } as const;
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title,
    config: { font: FONT, view: { stroke: "#ddd" } },
    vconcat: [
      {
        width: 720,
        height: 120,
        data: { values: demand },
        mark: { type: "area", opacity: 0.5, line: true },
        encoding: { x, y: { field: "demand", type: "quantitative", title: "demand (qps)" } },
      },
      {
        width: 720,
        height: 200,
        data: { values: rows },
        mark: { type: "line", strokeWidth: 1.5 },
        encoding: { x, y: { field: "fid", type: "quantitative", title: "FID", scale: { zero: false } }, color },
      },
      {
        width: 720,
        height: 200,
        data: { values: rows },
        mark: { type: "line", strokeWidth: 1.5 },
        encoding: { x, y: { field: "violation", type: "quantitative", title: "SLO violation ratio", scale: { domain: [0, 1] } }, color },
      },
    ],
  } as TopLevelSpec;
}

/** SLO violation ratio and FID per system, as bars. */
export function barsSpec(systems: readonly ChartedSystem[], title: string): TopLevelSpec {
  const values = systems.map((s) => ({ system: s.name, violation: s.sloViolationRatio, fid: s.fid }));
  const x = { field: "system", type: "nominal", sort: systems.map((s) => s.name), axis: { labelAngle: -35 }, title: null } as const;
  const bar = (field: string, label: string, fmt: string, zero: boolean) => ({
    width: 360,
    height: 240,
    layer: [
      {
        mark: { type: "bar", color: field === "fid" ? "#e45756" : "#4c78a8" },
        encoding: { x, y: { field, type: "quantitative", title: label, scale: { zero } } },
      },
      {
        mark: { type: "text", dy: -6, fontSize: 10 },
        encoding: { x, y: { field, type: "quantitative" }, text: { field, type: "quantitative", format: fmt } },
      },
    ],
  });
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title,
    config: { font: FONT },
    data: { values },
    hconcat: [bar("violation", "SLO violation ratio", ".4f", true), bar("fid", "FID (lower is better)", ".2f", false)],
  } as TopLevelSpec;
}

/** Renders a vega-lite spec to PNG bytes. */
export async function renderPng(spec: TopLevelSpec): Promise<Buffer> {
  const view = new View(parse(compile(spec).spec), { renderer: "none" });
  const svg = await view.toSVG();
  view.finalize();
  const png = new Resvg(svg, {
    background: "white",
    fitTo: { mode: "zoom", value: 1.5 },
    font: { loadSystemFonts: true, defaultFontFamily: FONT },
  })
    .render()
    .asPng();
  return Buffer.from(png);
}

/** One policy's point on a quality/SLO frontier. */
export interface FrontierPoint {
  system: string;
  /** Panel the point belongs to (e.g. the load). */
  panel: string;
  violation: number;
  fid: number;
}

/** FID against SLO violation ratio, one labelled point per system, one panel per `panel` value. */
export function frontierSpec(points: readonly FrontierPoint[], title: string): TopLevelSpec {
  const panels = [...new Set(points.map((p) => p.panel))];
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title,
    config: { font: FONT },
    data: { values: points },
    facet: { field: "panel", type: "nominal", sort: panels, title: null },
    columns: 2,
    spec: {
      width: 320,
      height: 240,
      layer: [
        {
          mark: { type: "point", filled: true, size: 70 },
          encoding: {
            x: { field: "violation", type: "quantitative", title: "SLO violation ratio", scale: { type: "symlog", constant: 0.001 } },
            y: { field: "fid", type: "quantitative", title: "FID (lower is better)", scale: { zero: false } },
            color: { field: "system", type: "nominal" },
          },
        },
        {
          mark: { type: "text", dx: 6, align: "left", fontSize: 9 },
          encoding: {
            x: { field: "violation", type: "quantitative" },
            y: { field: "fid", type: "quantitative" },
            text: { field: "system" },
          },
        },
      ],
    },
  } as TopLevelSpec;
}
