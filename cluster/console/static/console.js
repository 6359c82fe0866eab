// RocketBox console: live refresh of server-rendered fragments, and the throughput chart as inline
// SVG. No library: fetch and setInterval. A failed refresh keeps the last content and says so.
"use strict";

function liveRegions() {
  document.querySelectorAll("[data-live]").forEach(function (region) {
    var every = parseInt(region.dataset.every || "2000", 10);
    var busy = false;
    setInterval(function () {
      if (busy || document.hidden) { return; }
      busy = true;
      fetch(region.dataset.live, { headers: { "Accept": "text/html" } })
        .then(function (response) {
          if (!response.ok) { throw new Error("HTTP " + response.status); }
          return response.text();
        })
        .then(function (html) {
          region.innerHTML = html;
          region.classList.remove("stale");
          region.dataset.refreshed = String(Date.now());
        })
        .catch(function (error) {
          region.classList.add("stale");
          region.title = "not refreshed: " + error.message;
        })
        .finally(function () { busy = false; });
    }, every);
  });
}

var SVG = "http://www.w3.org/2000/svg";
var COLORS = { "in": "#2f6fdf", "out": "#d9822b" };

function svgElement(name, attributes, text) {
  var element = document.createElementNS(SVG, name);
  Object.keys(attributes).forEach(function (key) { element.setAttribute(key, attributes[key]); });
  if (text !== undefined) { element.textContent = text; }
  return element;
}

// The y axis: the smallest round step (1, 2 or 5 times a power of ten) that reaches the peak in
// at most five intervals, and the top at the first step at or above the peak, so every tick reads
// as a round number (10 20 30, 0.5 1 1.5), never a quarter of a round top (12.5 shown as "13").
var Y_INTERVALS_MAX = 5;

function yScale(peak) {
  var top = peak > 0 ? peak : 1;
  var power = Math.pow(10, Math.floor(Math.log10(top / Y_INTERVALS_MAX)));
  var step = [1, 2, 5, 10].map(function (m) { return m * power; })
    .find(function (candidate) { return candidate * Y_INTERVALS_MAX >= top; });
  var intervals = Math.max(1, Math.ceil(top / step - 1e-9));
  var decimals = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  return { step: step, intervals: intervals, max: step * intervals, decimals: decimals };
}

function drawChart(svg, data) {
  var width = 900, height = 320, left = 60, right = 10, top = 10, bottom = 30;
  var points = data.points;
  while (svg.firstChild) { svg.removeChild(svg.firstChild); }
  var now = points.length ? points[points.length - 1].t : Date.now();
  var start = now - data.window_s * 1000;
  var peak = 0;
  points.forEach(function (p) { peak = Math.max(peak, p["in"], p.out); });
  var scale = yScale(peak);
  function x(t) { return left + (t - start) / (now - start || 1) * (width - left - right); }
  function y(v) { return top + (1 - v / scale.max) * (height - top - bottom); }
  for (var i = 0; i <= scale.intervals; i++) {
    var value = scale.step * i;
    svg.appendChild(svgElement("line", { x1: left, x2: width - right, y1: y(value), y2: y(value), "class": "grid" }));
    svg.appendChild(svgElement("text", { x: left - 6, y: y(value) + 4, "text-anchor": "end", "class": "axis y-tick" },
                               String(Number(value.toFixed(scale.decimals)))));
  }
  for (var m = 0; m <= data.window_s / 60; m += Math.max(1, Math.round(data.window_s / 600))) {
    var t = now - m * 60000;
    svg.appendChild(svgElement("text", { x: x(t), y: height - 8, "text-anchor": "middle", "class": "axis" },
                               m === 0 ? "now" : "-" + m + " min"));
  }
  ["in", "out"].forEach(function (series) {
    var path = points.map(function (p) { return x(p.t).toFixed(1) + "," + y(p[series]).toFixed(1); }).join(" ");
    svg.appendChild(svgElement("polyline", { points: path, fill: "none", stroke: COLORS[series],
                                             "stroke-width": 2, "class": "series series-" + series }));
  });
  svg.dataset.points = String(points.length);
  var legend = document.getElementById("throughput-legend");
  if (legend) {
    var last = points.length ? points[points.length - 1] : { "in": 0, out: 0 };
    legend.innerHTML = "";
    ["in", "out"].forEach(function (series) {
      var item = document.createElement("span");
      item.className = "key key-" + series;
      item.style.borderColor = COLORS[series];
      item.textContent = series + ": " + last[series] + " msg/s";
      legend.appendChild(item);
    });
  }
  var table = document.querySelector("#throughput-latest tbody");
  if (table && points.length) {
    table.innerHTML = "";
    var by = points[points.length - 1].by;
    Object.keys(by).sort().forEach(function (broker) {
      var row = document.createElement("tr");
      [broker, by[broker]["in"], by[broker].out].forEach(function (cell) {
        var td = document.createElement("td");
        td.textContent = cell;
        row.appendChild(td);
      });
      table.appendChild(row);
    });
  }
}

function charts() {
  document.querySelectorAll("svg[data-chart]").forEach(function (svg) {
    function refresh() {
      fetch(svg.dataset.chart, { headers: { "Accept": "application/json" } })
        .then(function (response) { return response.json(); })
        .then(function (data) {
          if (data.error) { throw new Error(data.error); }
          drawChart(svg, data);
          svg.classList.remove("stale");
        })
        .catch(function () { svg.classList.add("stale"); });
    }
    refresh();
    setInterval(refresh, parseInt(svg.dataset.every || "2000", 10));
  });
}

document.addEventListener("DOMContentLoaded", function () {
  liveRegions();
  charts();
});
