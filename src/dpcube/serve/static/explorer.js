/* dpcube explorer: plain JavaScript, no build step, no network but the
 * service it is served from.
 *
 * It reads GET /api/releases and GET /api/releases/{name}, builds one widget per attribute
 * (ordinal: a range in the attribute's unit; nominal: categories, or a hierarchy node; spatial: a
 * heat map on which a dragged rectangle sets the lat/lon box; census: the region hierarchy and a
 * size range; data cube: a cuboid and filters on its attributes), and sends the query, in the
 * Python API's language, to POST /api/releases/{name}/answer. The answer is shown with its
 * interval, the level, and what the interval covers. Stable ids and data-testid attributes are
 * relied on by tests/browser.
 */
(function () {
  "use strict";

  const HEATMAP_MAX_BLOCKS = 32; // at most 32 x 32 heat-map blocks, i.e. 1,024 queries
  const HEATMAP_SIZE = 384; // canvas side in CSS pixels
  const CENSUS_MAX_BUTTONS = 40; // more regions below one region are listed in a select
  const BREAKDOWN_MAX_ROWS = 200; // regions below the chosen one answered with it

  const state = { releases: [], info: null, widgets: [], cuboid: null };
  const $ = (id) => document.getElementById(id);

  // -- small pure helpers --------------------------------------------------------------------
  function formatNumber(x) {
    if (x === null || x === undefined || Number.isNaN(x)) return "n/a";
    const a = Math.abs(x);
    if (Number.isInteger(x)) return String(x);
    if (a >= 1000) return x.toFixed(0);
    if (a >= 100) return x.toFixed(1);
    if (a >= 1) return x.toFixed(2);
    return x.toPrecision(3);
  }

  function formatCoord(x) {
    return String(Math.round(x * 1e6) / 1e6);
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k === "className") node.className = v;
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) node.append(c);
    return node;
  }

  function slug(name) {
    return String(name).replace(/[^A-Za-z0-9_-]/g, "_");
  }

  /* The bin scale of an ordinal attribute, as dpcube.schema.BinScale computes it: lower edges,
   * and the top (largest value an inclusive upper bound may name) of each bin. */
  function ordinalScale(info) {
    const edges = info.bin_edges;
    const whole = edges.every((e) => Number.isInteger(e));
    const tops = edges.slice(1).map((e) => (whole ? e - 1 : e));
    if (info.width !== undefined && info.range !== undefined) {
      const high = info.range[1];
      tops[tops.length - 1] = whole ? Math.floor(high) : high;
    }
    return { lows: edges.slice(0, -1), tops: tops, whole: whole };
  }

  /* Grid edges of a spatial attribute, [latitude edges, longitude edges]: the service sends
   * them as dpcube.schema.Spatial.scales computes them (exactly, from the bbox's decimals). */
  function spatialEdges(info) {
    return [info.lat_edges, info.lon_edges];
  }

  async function api(path, body) {
    const init = body === undefined ? {} : {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    };
    const response = await fetch(path, init);
    let data = null;
    try {
      data = await response.json();
    } catch (e) {
      throw new Error(`${path}: the service answered ${response.status} without JSON`);
    }
    if (!response.ok) throw new Error((data && data.error) || `${path}: HTTP ${response.status}`);
    return data;
  }

  function showError(message) {
    const node = $("error");
    node.textContent = message;
    node.hidden = !message;
  }

  function setStatus(message) {
    $("status").textContent = message || "";
  }

  // -- widgets: each returns {node, constraint(), reset()} -------------------------------------
  // constraint() returns undefined when the attribute is unconstrained, else the query value.

  function ordinalWidget(info) {
    const scale = ordinalScale(info);
    const first = scale.lows[0];
    const last = scale.tops[scale.tops.length - 1];
    const id = slug(info.name);
    const lo = el("input", { type: "number", id: `range-lo-${id}`, "data-testid": `range-lo-${id}`,
      min: first, max: last, step: "any", placeholder: formatNumber(first), "aria-label": `${info.name} from` });
    const hi = el("input", { type: "number", id: `range-hi-${id}`, "data-testid": `range-hi-${id}`,
      min: first, max: last, step: "any", placeholder: formatNumber(last), "aria-label": `${info.name} to` });
    const width = info.width !== undefined ? `bins of width ${formatNumber(info.width)}`
      : `${scale.lows.length} bins (edges ${info.bin_edges.slice(0, 6).map(formatNumber).join(", ")}${info.bin_edges.length > 6 ? ", ..." : ""})`;
    const hint = `${formatNumber(first)} .. ${formatNumber(last)} inclusive, ${width}; ` +
      (scale.whole ? "whole numbers: a bin [a, b) ends at b - 1" : "a bin [a, b) ends at b") +
      "; leave empty for no limit";
    const node = el("div", { className: "widget", "data-testid": `widget-${id}`, "data-kind": "ordinal" },
      el("span", { className: "name", text: `${info.name} (ordinal)` }),
      lo, document.createTextNode(" to "), hi,
      el("span", { className: "hint", text: hint }));
    return {
      name: info.name, node: node,
      constraint(overlapping) {
        if (lo.value === "" && hi.value === "") return undefined;
        const a = lo.value === "" ? first : Number(lo.value);
        const b = hi.value === "" ? last : Number(hi.value);
        if (!Number.isFinite(a) || !Number.isFinite(b)) throw new Error(`${info.name}: the range must be numbers`);
        return overlapping ? { values: [a, b], overlapping: true } : [a, b];
      },
      reset() { lo.value = ""; hi.value = ""; },
    };
  }

  function nominalWidget(info) {
    const id = slug(info.name);
    const select = el("select", { multiple: true, id: `categories-${id}`,
      "data-testid": `categories-${id}`, size: Math.min(8, info.labels.length), "aria-label": info.name });
    info.labels.forEach((label) => select.append(el("option", { value: label, text: label })));
    const node = el("div", { className: "widget", "data-testid": `widget-${id}`, "data-kind": "nominal" },
      el("span", { className: "name", text: `${info.name} (categories)` }), select,
      el("span", { className: "hint", text: "select one or more categories (Ctrl/Cmd-click): the answer counts them all; none selected: all" }));
    return {
      name: info.name, node: node,
      constraint() {
        const picked = [];
        Array.from(select.options).forEach((o, i) => { if (o.selected) picked.push(i); });
        if (picked.length === 0 || picked.length === info.labels.length) return undefined;
        const a = picked[0];
        const b = picked[picked.length - 1];
        if (b - a + 1 !== picked.length) {
          // categories that skip others: the set of them ({"in": [...]}, one query, their sum)
          return { in: picked.map((i) => info.labels[i]) };
        }
        return a === b ? info.labels[a] : [info.labels[a], info.labels[b]];
      },
      reset() { Array.from(select.options).forEach((o) => { o.selected = false; }); },
    };
  }

  /* Flatten a hierarchy mapping {node: {child: ...} | [leaf, ...] | null} depth-first. */
  function hierarchyRows(mapping, depth, out) {
    if (mapping === null || mapping === undefined) return out;
    const items = Array.isArray(mapping) ? mapping.map((n) => [n, null]) : Object.entries(mapping);
    for (const [name, sub] of items) {
      out.push({ name: String(name), depth: depth, leaf: sub === null || sub === undefined });
      hierarchyRows(sub, depth + 1, out);
    }
    return out;
  }

  function hierarchyWidget(info) {
    const id = slug(info.name);
    const root = info.root || "*";
    const rows = hierarchyRows(info.hierarchy, 0, []);
    const select = el("select", { multiple: true, id: `node-${id}`, "data-testid": `node-${id}`,
      size: Math.min(10, rows.length), "aria-label": info.name });
    for (const row of rows) {
      const pad = "\u00a0\u00a0".repeat(row.depth);
      select.append(el("option", { value: row.name, text: pad + row.name + (row.leaf ? "" : " \u25be") }));
    }
    const node = el("div", { className: "widget", "data-testid": `widget-${id}`, "data-kind": "hierarchy" },
      el("span", { className: "name", text: `${info.name} (hierarchy below ${root})` }), select,
      el("span", { className: "hint", text: "a node counts every category below it; select several (Ctrl/Cmd-click) for the set of them; none selected: all" }));
    return {
      name: info.name, node: node,
      constraint() {
        const picked = Array.from(select.options).filter((o) => o.selected).map((o) => o.value);
        if (picked.length === 0) return undefined;
        return picked.length === 1 ? picked[0] : { in: picked };
      },
      reset() { Array.from(select.options).forEach((o) => { o.selected = false; }); },
    };
  }

  function censusWidgets(hierarchy) {
    const regions = hierarchy.regions;
    const byName = new Map(regions.map((r) => [r.name, r]));
    const children = new Map();
    for (const r of regions) {
      if (r.parent !== null) {
        if (!children.has(r.parent)) children.set(r.parent, []);
        children.get(r.parent).push(r.name);
      }
    }
    const root = regions.find((r) => r.parent === null).name;
    let current = root;
    const crumbs = el("div", { className: "breadcrumb", id: "region-path", "data-testid": "region-path" });
    const kids = el("div", { className: "children", id: "region-children", "data-testid": "region-children" });
    const chosen = el("span", { id: "region-current", "data-testid": "region-current" });
    function render() {
      crumbs.replaceChildren();
      const path = [];
      for (let r = current; r !== null && r !== undefined; r = byName.get(r).parent) path.unshift(r);
      path.forEach((name, i) => {
        if (i > 0) crumbs.append(document.createTextNode(" \u203a "));
        if (name === current) crumbs.append(el("span", { className: "current", text: name }));
        else {
          const b = el("button", { type: "button", id: `region-up-${slug(name)}`, "data-testid": `region-up-${slug(name)}`, text: name });
          b.addEventListener("click", () => { current = name; render(); });
          crumbs.append(b);
        }
      });
      kids.replaceChildren();
      const below = children.get(current) || [];
      if (below.length) kids.append(document.createTextNode(`${below.length} regions below: `));
      if (below.length > CENSUS_MAX_BUTTONS) { // thousands of tracts: a list, not buttons
        const list = el("select", { id: "region-children-select", "data-testid": "region-children-select", "aria-label": `regions below ${current}` });
        list.append(el("option", { value: "", text: "go down to..." }));
        for (const name of below) list.append(el("option", { value: name, text: name }));
        list.addEventListener("change", () => { if (list.value) { current = list.value; render(); } });
        kids.append(list);
      } else {
        for (const name of below) {
          const b = el("button", { type: "button", id: `region-child-${slug(name)}`, "data-testid": `region-child-${slug(name)}`, text: name });
          b.addEventListener("click", () => { current = name; render(); });
          kids.append(b);
        }
      }
      chosen.textContent = current;
    }
    render();
    const region = {
      name: "region",
      node: el("div", { className: "widget", "data-testid": "widget-region", "data-kind": "census-region" },
        el("span", { className: "name", text: "region" }), crumbs, kids,
        el("span", { className: "hint" }, document.createTextNode("answering for: "), chosen)),
      constraint() { return current; },
      reset() { current = root; render(); },
      // the same question for each region below the chosen one (a table under the answer)
      breakdown(query) {
        return (children.get(current) || []).slice(0, BREAKDOWN_MAX_ROWS)
          .map((name) => ({ label: name, query: { ...query, region: name } }));
      },
    };
    const k = hierarchy.max_size;
    const lo = el("input", { type: "number", id: "size-lo", "data-testid": "size-lo", min: 1, max: k, step: 1, placeholder: "1", "aria-label": "size from" });
    const hi = el("input", { type: "number", id: "size-hi", "data-testid": "size-hi", min: 1, max: k, step: 1, placeholder: String(k), "aria-label": "size to" });
    const size = {
      name: "size",
      node: el("div", { className: "widget", "data-testid": "widget-size", "data-kind": "census-size" },
        el("span", { className: "name", text: `group size (${hierarchy.size_label || "records per group"})` }), lo, document.createTextNode(" to "), hi,
        el("span", { className: "hint", text: `1 .. ${k}${hierarchy.top_coded ? ` (the last, ${k}, counts groups of ${k} or more)` : ""}; the answer is a number of groups` })),
      constraint() {
        if (lo.value === "" && hi.value === "") return undefined;
        const a = lo.value === "" ? 1 : Number(lo.value);
        const b = hi.value === "" ? k : Number(hi.value);
        return a === b ? a : [a, b];
      },
      reset() { lo.value = ""; hi.value = ""; },
    };
    return [region, size];
  }

  function spatialWidget(info, releaseName) {
    const id = slug(info.name);
    const [lat0, lat1] = info.lat_range;
    const [lon0, lon1] = info.lon_range;
    const [rows, cols] = info.resolution;
    const [latEdges, lonEdges] = spatialEdges(info);
    const inputs = {};
    for (const key of ["lat-lo", "lat-hi", "lon-lo", "lon-hi"]) {
      inputs[key] = el("input", { type: "number", step: "any", id: `${key}-${id}`, "data-testid": `${key}-${id}`, "aria-label": `${info.name} ${key}` });
    }
    const canvas = el("canvas", { className: "heatmap", id: `heatmap-${id}`, "data-testid": `heatmap-${id}`,
      width: HEATMAP_SIZE, height: HEATMAP_SIZE, "data-state": "loading",
      "aria-label": `heat map of ${info.name}: drag a rectangle to set the box` });
    const legend = el("div", { className: "legend", id: `heatmap-legend-${id}`, "data-testid": `heatmap-legend-${id}`, text: "loading the heat map..." });
    const node = el("div", { className: "widget", "data-testid": `widget-${id}`, "data-kind": "spatial" },
      el("span", { className: "name", text: `${info.name} (location)` }),
      el("div", { className: "spatial-row" },
        el("div", { className: "heatmap-wrap" }, canvas, legend),
        el("div", { className: "box-inputs" },
          el("div", {}, el("span", { className: "axis", text: "latitude" }), inputs["lat-lo"], document.createTextNode(" to "), inputs["lat-hi"]),
          el("div", {}, el("span", { className: "axis", text: "longitude" }), inputs["lon-lo"], document.createTextNode(" to "), inputs["lon-hi"]))),
      el("span", { className: "hint", text: `box latitude ${formatCoord(lat0)} .. ${formatCoord(lat1)}, longitude ${formatCoord(lon0)} .. ${formatCoord(lon1)} degrees on a ${rows} x ${cols} grid; drag on the map to draw a box (it snaps to grid cells); empty: the whole box` }));

    const ctx = canvas.getContext("2d");
    let image = null; // ImageData of the drawn heat map
    let drag = null;

    // canvas pixel <-> grid cell (row 0 is the southernmost band, drawn at the bottom)
    const colAt = (x) => Math.min(cols - 1, Math.max(0, Math.floor((x / canvas.width) * cols)));
    const rowAt = (y) => Math.min(rows - 1, Math.max(0, Math.floor(((canvas.height - y) / canvas.height) * rows)));

    function drawBox(r0, r1, c0, c1) {
      if (image) ctx.putImageData(image, 0, 0);
      const x0 = (c0 / cols) * canvas.width;
      const x1 = ((c1 + 1) / cols) * canvas.width;
      const y0 = canvas.height - ((r1 + 1) / rows) * canvas.height;
      const y1 = canvas.height - (r0 / rows) * canvas.height;
      ctx.strokeStyle = "#ff2d2d";
      ctx.lineWidth = 2;
      ctx.strokeRect(x0 + 1, y0 + 1, x1 - x0 - 2, y1 - y0 - 2);
    }

    // Grid edges to 15 significant digits (39.965, not 39.964999999999996): the service matches
    // edges within 1e-9 of the axis span, far coarser than this rounding (5e-15 relative).
    const edgeText = (x) => String(Number(x.toPrecision(15)));
    function setBox(r0, r1, c0, c1) {
      inputs["lat-lo"].value = edgeText(latEdges[r0]);
      inputs["lat-hi"].value = edgeText(latEdges[r1 + 1]);
      inputs["lon-lo"].value = edgeText(lonEdges[c0]);
      inputs["lon-hi"].value = edgeText(lonEdges[c1 + 1]);
      drawBox(r0, r1, c0, c1);
      canvas.setAttribute("data-box", JSON.stringify([[r0, r1], [c0, c1]]));
    }

    function position(event) {
      const rect = canvas.getBoundingClientRect();
      return { x: ((event.clientX - rect.left) * canvas.width) / rect.width,
               y: ((event.clientY - rect.top) * canvas.height) / rect.height };
    }
    function boxOf(a, b) {
      const r = [rowAt(a.y), rowAt(b.y)].sort((p, q) => p - q);
      const c = [colAt(a.x), colAt(b.x)].sort((p, q) => p - q);
      return [r[0], r[1], c[0], c[1]];
    }
    // pointer events: a mouse, a pen or a finger draws the same way
    canvas.addEventListener("pointerdown", (e) => {
      drag = position(e);
      canvas.setPointerCapture(e.pointerId); // the drag may end outside the canvas
      e.preventDefault();
    });
    canvas.addEventListener("pointermove", (e) => { if (drag) drawBox(...boxOf(drag, position(e))); });
    const finish = (e) => {
      if (!drag) return;
      const start = drag;
      drag = null;
      setBox(...boxOf(start, position(e)));
    };
    canvas.addEventListener("pointerup", finish);
    canvas.addEventListener("pointercancel", () => { drag = null; if (image) ctx.putImageData(image, 0, 0); });

    async function load() {
      // blocks of whole grid cells, at most HEATMAP_MAX_BLOCKS a side; each block is one query
      const br = Math.ceil(rows / Math.min(rows, HEATMAP_MAX_BLOCKS));
      const bc = Math.ceil(cols / Math.min(cols, HEATMAP_MAX_BLOCKS));
      const blocks = [];
      for (let r = 0; r < rows; r += br) {
        for (let c = 0; c < cols; c += bc) blocks.push([r, Math.min(rows, r + br) - 1, c, Math.min(cols, c + bc) - 1]);
      }
      const queries = blocks.map(([r0, r1, c0, c1]) => ({ [info.name]: { bins: [[r0, r1], [c0, c1]] } }));
      const data = await api(`/api/releases/${encodeURIComponent(releaseName)}/answer`, { queries: queries, level: 0.95 });
      const density = data.answers.map((a, i) => {
        const [r0, r1, c0, c1] = blocks[i];
        return Math.max(0, a.answer || 0) / ((r1 - r0 + 1) * (c1 - c0 + 1));
      });
      const top = Math.max(...density, 1e-12);
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      blocks.forEach(([r0, r1, c0, c1], i) => {
        const t = Math.sqrt(density[i] / top); // square-root scale: sparse cells stay visible
        ctx.fillStyle = colour(t);
        const x0 = (c0 / cols) * canvas.width;
        const x1 = ((c1 + 1) / cols) * canvas.width;
        const y0 = canvas.height - ((r1 + 1) / rows) * canvas.height;
        const y1 = canvas.height - (r0 / rows) * canvas.height;
        ctx.fillRect(Math.floor(x0), Math.floor(y0), Math.ceil(x1 - x0) + 1, Math.ceil(y1 - y0) + 1);
      });
      image = ctx.getImageData(0, 0, canvas.width, canvas.height);
      legend.textContent = `released counts per grid cell, averaged over ${br} x ${bc}-cell blocks ` +
        `(square-root colour scale, darkest 0, brightest ${formatNumber(top)}); north is up`;
      canvas.setAttribute("data-state", "ready");
      canvas.setAttribute("data-blocks", String(blocks.length));
    }
    load().catch((e) => { legend.textContent = `the heat map could not be drawn: ${e.message}`; canvas.setAttribute("data-state", "error"); });

    return {
      name: info.name, node: node,
      constraint(overlapping) {
        const v = {};
        const pair = (a, b, what) => {
          const x = inputs[a].value;
          const y = inputs[b].value;
          if (x === "" && y === "") return undefined;
          if (x === "" || y === "") throw new Error(`${info.name}: give both ends of the ${what} range, or neither`);
          return [Number(x), Number(y)];
        };
        const lat = pair("lat-lo", "lat-hi", "latitude");
        const lon = pair("lon-lo", "lon-hi", "longitude");
        if (lat === undefined && lon === undefined) return undefined;
        if (lat !== undefined) v.lat = lat;
        if (lon !== undefined) v.lon = lon;
        if (overlapping) v.overlapping = true;
        return v;
      },
      reset() {
        for (const input of Object.values(inputs)) input.value = "";
        if (image) ctx.putImageData(image, 0, 0);
        canvas.removeAttribute("data-box");
      },
    };
  }

  /* A dark-blue to yellow ramp (close to viridis) for t in [0, 1]. */
  function colour(t) {
    const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
    const x = Math.min(1, Math.max(0, t)) * (stops.length - 1);
    const i = Math.min(stops.length - 2, Math.floor(x));
    const f = x - i;
    const c = stops[i].map((v, k) => Math.round(v + f * (stops[i + 1][k] - v)));
    return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
  }

  function attributeWidget(info, releaseName) {
    if (info.kind === "ordinal") return ordinalWidget(info);
    if (info.kind === "spatial") return spatialWidget(info, releaseName);
    if (info.kind === "nominal" && info.hierarchy) return hierarchyWidget(info);
    return nominalWidget(info);
  }

  // -- the page ---------------------------------------------------------------------------------

  function showGuarantee(info) {
    const dl = $("guarantee");
    dl.replaceChildren();
    const g = info.guarantee || {};
    const rows = [
      ["release", `${info.name} (${info.kind}, mechanism ${info.mechanism})`],
      ["privacy", `epsilon = ${g.epsilon}${g.delta ? `, delta = ${g.delta}` : ""}, neighbours: ${g.neighbour === "replace" ? "one record replaced" : g.neighbour === "add_remove" ? "one record added or removed" : g.neighbour}`],
      ["errors", `${info.error_kind}: ${info.error_reason || ""}`],
    ];
    if (g.privacy_unit && typeof g.privacy_unit === "object") {
      const u = g.privacy_unit;
      const bounds = Object.entries(u).filter(([k, v]) => k !== "column" && v !== null).map(([k, v]) => `${k.replace(/_/g, " ")} ${v}`).join(", ");
      rows.push(["privacy unit", `one unit${u.column ? ` of column ${u.column}` : ""}, all its rows (${bounds})`]);
    } else if (g.notes && g.notes.privacy_unit) rows.push(["privacy unit", String(g.notes.privacy_unit)]);
    if (info.metadata && info.metadata.release_id) rows.push(["release id", info.metadata.release_id]);
    for (const [k, v] of rows) dl.append(el("dt", { text: k }), el("dd", { "data-testid": `guarantee-${k.replace(/ /g, "-")}`, text: v }));
    const banner = $("publication-banner");
    if (info.not_for_publication || info.for_publication === false) {
      const why = info.not_for_publication || "this release may not be published";
      banner.textContent = /NOT FOR PUBLICATION/.test(why) ? why : `NOT FOR PUBLICATION: ${why}`;
      banner.hidden = false;
    } else {
      banner.hidden = true;
      banner.textContent = "";
    }
    const link = $("report-link");
    link.href = `/api/releases/${encodeURIComponent(info.name)}/report`;
    link.hidden = !info.report;
    $("release-info").hidden = false;
  }

  function buildWidgets() {
    const info = state.info;
    const box = $("widgets");
    box.replaceChildren();
    state.widgets = [];
    if (info.hierarchy) {  // a release of regions and sizes (census), not attributes
      state.widgets = censusWidgets(info.hierarchy);
    } else if (info.schema) {
      let attributes = info.schema.attributes;
      if (state.cuboid) attributes = attributes.filter((a) => state.cuboid.includes(a.name));
      state.widgets = attributes.map((a) => attributeWidget(a, info.name));
    }
    for (const w of state.widgets) box.append(w.node);
    if (!state.widgets.length) box.append(el("p", { text: state.cuboid && state.cuboid.length === 0 ? "the grand total (no attribute to constrain)" : "this release has no attribute to constrain" }));
  }

  function setupCuboids(info) {
    const picker = $("cuboid-picker");
    const select = $("cuboid-select");
    select.replaceChildren();
    state.cuboid = null;
    if (!info.cuboids || !info.cuboids.length) {
      picker.hidden = true;
      return;
    }
    info.cuboids.forEach((c, i) => {
      select.append(el("option", { value: String(i), text: c.length ? c.join(" \u00d7 ") : "(grand total)" }));
    });
    picker.hidden = false;
    state.cuboid = info.cuboids[0];
    select.onchange = () => {
      state.cuboid = info.cuboids[Number(select.value)];
      buildWidgets();
      $("result").hidden = true;
    };
  }

  async function chooseRelease(name) {
    showError("");
    $("result").hidden = true;
    $("query-form").hidden = true;
    if (!name) return;
    setStatus(`loading ${name}...`);
    try {
      const info = await api(`/api/releases/${encodeURIComponent(name)}`);
      state.info = info;
      showGuarantee(info);
      setupCuboids(info);
      buildWidgets();
      $("overlapping-field").hidden = !info.schema; // a census query has no value ranges to widen
      $("query-form").hidden = false;
      const url = new URL(window.location.href);
      url.searchParams.set("release", name);
      window.history.replaceState(null, "", url);
      setStatus("");
      document.body.setAttribute("data-release", name);
    } catch (e) {
      showError(`could not load release ${name}: ${e.message}`);
      setStatus("");
    }
  }

  function currentQuery() {
    const overlapping = $("overlapping").checked;
    const query = {};
    for (const w of state.widgets) {
      const c = w.constraint(overlapping);
      if (c !== undefined) query[w.name] = c;
    }
    return query;
  }

  function coversText(data, answer) {
    const level = `${Math.round(data.level * 1000) / 10} %`;
    if (data.error_kind === "exact") {
      return `${level} interval = answer \u00b1 z \u00d7 the exact standard deviation of the noise added for privacy (sd ${formatNumber(answer.stddev)}). It covers the privacy noise only, not errors in the data itself.`;
    }
    if (data.error_kind === "bound") {
      return `${level} interval valid on any data (it assumes nothing about how the data lie): ${answer.interval_reason || ""}`;
    }
    if (data.error_kind === "bootstrap") {
      return `${level} interval from a parametric bootstrap (${data.bootstrap_runs} re-releases of the release itself, no budget spent): it covers the mechanism's whole error (noise and its post-processing), estimated, not exact; error sd ${formatNumber(answer.stddev)}. ${data.error_reason || ""}`;
    }
    return `no interval: ${data.error_reason || "this release has no error estimate"}`;
  }

  /* A visible warning next to an answer whose interval is not trusted (not valid by construction). */
  function untrustedText(a) {
    return a.trusted === false ? ` \u26a0 NOT TRUSTED: ${a.interval_reason || "no interval valid on any data"}` : "";
  }

  /* The answers for the regions below the chosen one: a table under the main answer. */
  function showBreakdown(rows, answers, level) {
    const table = $("breakdown");
    const body = table.querySelector("tbody");
    body.replaceChildren();
    rows.forEach((row, i) => {
      const a = answers[i];
      const interval = (a.lower === null || a.upper === null ? "(no interval)"
        : `[${formatNumber(a.lower)}, ${formatNumber(a.upper)}]`) + untrustedText(a);
      body.append(el("tr", { "data-label": row.label, "data-value": String(a.answer) },
        el("td", { text: row.label }), el("td", { className: "num", text: formatNumber(a.answer) }),
        el("td", { className: "num", text: interval })));
    });
    table.querySelector("caption").textContent = `below it, the same question (${Math.round(level * 1000) / 10} % intervals)`;
    table.hidden = rows.length === 0;
  }

  async function answer(event) {
    event.preventDefault();
    showError("");
    $("result").hidden = true;
    const info = state.info;
    if (!info) return;
    let query;
    try {
      query = currentQuery();
    } catch (e) {
      showError(e.message);
      return;
    }
    const level = Number($("level-select").value);
    const button = $("answer-button");
    button.disabled = true;
    setStatus("answering...");
    try {
      const rows = state.widgets.flatMap((w) => (w.breakdown ? w.breakdown(query) : []));
      const queries = [query, ...rows.map((r) => r.query)];
      const path = `/api/releases/${encodeURIComponent(info.name)}/answer`;
      const widened = $("overlapping").checked && info.schema && Object.keys(query).length > 0;
      // widened ranges: the GET form of the endpoint also says which values the answer covers
      const data = widened
        ? await api(`${path}?${new URLSearchParams({ where: JSON.stringify(query), level: String(level), overlapping: "true" })}`)
        : await api(path, { queries: queries, level: level });
      const covered = $("answer-covered");
      covered.textContent = data.covered ? `the answer covers ${Object.entries(data.covered).map(([k, v]) => `${k} ${v}`).join("; ")} (the bins the ranges overlap)` : "";
      covered.hidden = !data.covered;
      const a = data.answers[0];
      showBreakdown(rows, data.answers.slice(1), data.level);
      const value = $("answer-value");
      value.textContent = formatNumber(a.answer);
      value.setAttribute("data-value", String(a.answer));
      const interval = $("answer-interval");
      if (a.lower === null || a.upper === null) {
        interval.textContent = "(no interval)";
        interval.removeAttribute("data-lower");
        interval.removeAttribute("data-upper");
      } else {
        interval.textContent = `[${formatNumber(a.lower)}, ${formatNumber(a.upper)}] at ${Math.round(data.level * 1000) / 10} %`;
        interval.setAttribute("data-lower", String(a.lower));
        interval.setAttribute("data-upper", String(a.upper));
      }
      interval.setAttribute("data-level", String(data.level));
      interval.setAttribute("data-trusted", String(a.trusted !== false));
      interval.textContent += untrustedText(a);
      $("answer-covers").textContent = coversText(data, a);
      $("answer-query").textContent = JSON.stringify(query);
      $("result").hidden = false;
      $("result").setAttribute("data-query", JSON.stringify(query));
      setStatus("");
    } catch (e) {
      $("result").hidden = true;
      showError(e.message);
      setStatus("");
    } finally {
      button.disabled = false;
    }
  }

  async function start() {
    $("query-form").addEventListener("submit", answer);
    $("reset-button").addEventListener("click", () => { state.widgets.forEach((w) => w.reset()); $("result").hidden = true; showError(""); });
    const select = $("release-select");
    select.addEventListener("change", () => chooseRelease(select.value));
    try {
      const data = await api("/api/releases");
      state.releases = data.releases;
      select.replaceChildren(el("option", { value: "", text: "choose a release" }));
      for (const r of data.releases) {
        select.append(el("option", { value: r.name, text: `${r.name} (${r.kind}, ${r.mechanism}, epsilon ${r.epsilon})${r.for_publication ? "" : " NOT FOR PUBLICATION"}` }));
      }
      select.disabled = false;
      $("release-count").textContent = `${data.releases.length} release(s) served`;
      const wanted = new URL(window.location.href).searchParams.get("release");
      const initial = data.releases.some((r) => r.name === wanted) ? wanted
        : data.releases.length === 1 ? data.releases[0].name : "";
      if (initial) {
        select.value = initial;
        await chooseRelease(initial);
      }
      document.body.setAttribute("data-ready", "true");
    } catch (e) {
      showError(`could not list the releases: ${e.message}`);
    }
  }

  // exposed for tests and the console; nothing else is global
  window.dpcubeExplorer = { formatNumber: formatNumber, ordinalScale: ordinalScale, spatialEdges: spatialEdges, currentQuery: currentQuery };
  start();
})();
