// The fixed files of the history dashboard (perfgate/dashboard.hpp): the page, its script and its style.
// The page runs from file:// with no network: Chart.js is the vendored copy, data come as <script> files.
//
// What the script does:
//   #/            overview: filters (class, suite, text, only series with change points), one small trend
//                 plot per series, 12 to a page, series with change points first;
//   #/series/ID   one benchmark of one class: a large plot per metric and the table of its change points.
// When a view has drawn its plots, <body> gets data-state="ready", data-charts (plots created) and
// data-painted (canvases with pixels drawn): what the headless-Chromium test reads.
'use strict';
// perfgate history dashboard. Data arrive as scripts calling perfgate.index / perfgate.sessions /
// perfgate.chunk (a page opened from file:// cannot fetch()).
var perfgate = (function () {
  var index = null;
  var sessions = {};        // class index -> sessions
  var chunks = {};          // chunk index -> {series: {...}}
  var waiting = {};         // script url -> [resolve]
  var charts = [];
  var PAGE = 12;

  function load(url, ready) {
    if (ready()) return Promise.resolve();
    return new Promise(function (resolve, reject) {
      if (waiting[url]) { waiting[url].push(resolve); return; }
      waiting[url] = [resolve];
      var s = document.createElement('script');
      s.src = url;
      s.onerror = function () { reject(new Error('cannot load ' + url)); };
      document.head.appendChild(s);
    });
  }
  function arrived(url) {
    (waiting[url] || []).forEach(function (r) { r(); });
    delete waiting[url];
  }
  function loadSessions(k) {
    return load('data/sessions-' + k + '.js', function () { return sessions[k] !== undefined; });
  }
  function loadChunk(k) {
    return load('data/chunk-' + k + '.js', function () { return chunks[k] !== undefined; });
  }

  // The compact form of a series (dashboard.cpp) made whole: session positions, and the level per point.
  function expand(d) {
    if (!d.s) d.s = d.m.map(function (_, i) { return d.first + i; });
    d.level = [];
    d.segments.forEach(function (g, k) {
      var end = k + 1 < d.segments.length ? d.segments[k + 1].from : d.m.length;
      for (var i = g.from; i < end; i++) d.level[i] = g.level;
    });
    return d;
  }

  // Names come from users' code: besides HTML, characters that reorder, hide or break text (controls, bidi
  // overrides such as U+202E, zero-width characters, line separators) are shown as <U+202E>.
  function esc(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    }).replace(/[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060-\u2064\u2066-\u2069\ufeff]/g,
      function (c) { return '&lt;U+' + ('000' + c.charCodeAt(0).toString(16).toUpperCase()).slice(-4) + '&gt;'; });
  }
  function pct(x) { return (x >= 0 ? '+' : '') + (100 * x).toFixed(2) + '%'; }
  // A change in words: a higher rate is faster, a higher time or phase slower; suite steps are times.
  function changeSpan(x, kind) {
    var worse = kind === 'rate' ? x < 0 : x > 0;
    var word = kind === 'info' ? (x > 0 ? 'larger' : 'smaller') : (worse ? 'slower' : 'faster');
    return '<span class="' + (worse ? 'slower' : 'faster') + '">' + pct(x) + ' ' + word + '</span>';
  }
  function unit(row) {
    if (row.metric === 'time') return 'ns';
    if (row.kind === 'phase') return 'ms';
    return row.metric;
  }
  function commitUrl(commit) {
    return index.commit_url ? index.commit_url.split('{commit}').join(encodeURIComponent(commit)) : '';
  }
  function commitLink(commit) {
    var url = commitUrl(commit);
    var text = '<code>' + esc(commit.substring(0, 12)) + '</code>';
    return url ? '<a href="' + esc(url) + '">' + text + '</a>' : text;
  }

  // ---- plots -----------------------------------------------------------------------------------
  // Dashed red vertical lines at the change points (Chart.js 3 has no annotations without a plugin).
  var changeLines = {
    id: 'perfgateChangeLines',
    afterDatasetsDraw: function (chart) {
      var marks = chart.options.plugins.perfgateChangeLines.indices || [];
      var x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx;
      ctx.save();
      ctx.strokeStyle = 'rgba(207, 34, 46, 0.8)';
      ctx.setLineDash([4, 3]);
      ctx.lineWidth = 1.5;
      marks.forEach(function (i) {
        var px = (x.getPixelForValue(i - 1) + x.getPixelForValue(i)) / 2;
        ctx.beginPath(); ctx.moveTo(px, area.top); ctx.lineTo(px, area.bottom); ctx.stroke();
      });
      ctx.restore();
    }
  };

  function datasets(row, d, big) {
    var n = d.m.length;
    var many = n > 150;
    var sets = [];
    sets.push({ type: 'bar', label: 'spread (process-run medians)', data: d.lo.map(function (lo, i) { return [lo, d.hi[i]]; }),
                backgroundColor: 'rgba(84, 174, 255, 0.35)', borderWidth: 0, barPercentage: 1.0, categoryPercentage: 0.8, order: 5 });
    sets.push({ type: 'line', label: 'session median', data: d.m, borderColor: '#0969da', backgroundColor: '#0969da',
                borderWidth: 1.2, pointRadius: many ? 0 : (big ? 2.5 : 1.5), pointHoverRadius: 4, order: 1 });
    sets.push({ type: 'line', label: 'level', data: d.level, borderColor: 'rgba(130, 80, 223, 0.9)', borderWidth: 2,
                stepped: 'middle', pointRadius: 0, order: 2 });
    if (d.band) {
      var hi = d.m.map(function (_, i) { return i >= d.band.from ? d.band.high : null; });
      var lo = d.m.map(function (_, i) { return i >= d.band.from ? d.band.low : null; });
      sets.push({ type: 'line', label: 'learned band (\u00b12 SD)', data: hi, borderColor: 'rgba(26, 127, 55, 0.5)',
                  borderWidth: 1, pointRadius: 0, fill: false, order: 4 });
      sets.push({ type: 'line', label: 'learned band low', data: lo, borderColor: 'rgba(26, 127, 55, 0.5)',
                  backgroundColor: 'rgba(26, 127, 55, 0.12)', borderWidth: 1, pointRadius: 0, fill: '-1', order: 4 });
    }
    if (d.baseline !== undefined) {
      sets.push({ type: 'line', label: 'stored baseline', data: d.m.map(function () { return d.baseline; }),
                  borderColor: '#bf8700', borderDash: [6, 4], borderWidth: 1.5, pointRadius: 0, order: 3 });
    }
    if (d.changes.length) {
      var marks = d.m.map(function () { return null; });
      d.changes.forEach(function (c) { marks[c.i] = d.m[c.i]; });
      sets.push({ type: 'line', label: 'change point', data: marks, showLine: false, pointStyle: 'triangle',
                  pointRadius: big ? 8 : 6, borderColor: '#cf222e', backgroundColor: '#cf222e', order: 0 });
    }
    return sets;
  }

  function plot(canvas, row, d, big) {
    var s = sessions[row.class];
    var labels = d.s.map(function (k) { return s.commit[k].substring(0, 8); });
    var chart = new Chart(canvas.getContext('2d'), {
      data: { labels: labels, datasets: datasets(row, d, big) },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        interaction: { mode: 'index', intersect: false },
        scales: { x: { ticks: { maxTicksLimit: big ? 16 : 6, maxRotation: 0 } },
                  // Bars would start the axis at zero: a trend of +-5% needs the axis around the data.
                  y: { beginAtZero: false, title: { display: big, text: row.metric + ' (' + unit(row) + ')' } } },
        plugins: {
          legend: { display: big, labels: { filter: function (item) { return item.text !== 'learned band low'; } } },
          perfgateChangeLines: { indices: d.changes.map(function (c) { return c.i; }) },
          tooltip: { callbacks: {
            title: function (items) {
              var k = d.s[items[0].dataIndex];
              return s.commit[k].substring(0, 12) + '  ' + s.time[k] + (s.branch[k] ? '  (' + s.branch[k] + ')' : '');
            },
            footer: function () { return index.commit_url ? 'click: open the commit' : ''; } } }
        },
        onClick: function (event, elements) {
          if (!elements.length) return;
          var url = commitUrl(s.commit[d.s[elements[0].index]]);
          if (url) window.open(url, '_blank');
        }
      },
      plugins: [changeLines]
    });
    charts.push(chart);
    return chart;
  }

  // A canvas counts as painted when some of its pixels are not transparent.
  function painted(canvas) {
    try {
      var ctx = canvas.getContext('2d');
      var img = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      for (var i = 3; i < img.length; i += 4 * 7) if (img[i] !== 0) return true;
    } catch (e) { return false; }
    return false;
  }
  function done(view) {
    var n = 0;
    charts.forEach(function (c) { if (painted(c.canvas)) n++; });
    document.body.dataset.view = view;
    document.body.dataset.charts = String(charts.length);
    document.body.dataset.painted = String(n);
    document.body.dataset.state = 'ready';
  }
  function failed(error) {
    document.body.dataset.state = 'error';
    document.getElementById('view').insertAdjacentHTML('afterbegin', '<p class="slower">' + esc(error.message || error) + '</p>');
  }
  function reset() {
    charts.forEach(function (c) { c.destroy(); });
    charts = [];
    document.body.dataset.state = 'loading';
  }

  // ---- overview --------------------------------------------------------------------------------
  function params() {
    var q = {};
    var h = location.hash.replace(/^#\/?/, '');
    var parts = h.split('?');
    (parts[1] || '').split('&').forEach(function (kv) {
      if (!kv) return;
      var p = kv.split('=');
      q[decodeURIComponent(p[0])] = decodeURIComponent(p[1] || '');
    });
    return { path: parts[0], q: q };
  }
  function overviewHash(q) {
    var keys = Object.keys(q).filter(function (k) { return q[k] !== '' && q[k] !== undefined; });
    return '#/?' + keys.map(function (k) { return encodeURIComponent(k) + '=' + encodeURIComponent(q[k]); }).join('&');
  }
  function matching(q) {
    var text = (q.q || '').toLowerCase();
    var rows = index.series.filter(function (r) {
      return (q.class === undefined || q.class === '' || String(r.class) === q.class) &&
             (q.suite === undefined || q.suite === '' || String(r.suite) === q.suite) &&
             (!q.changes || r.changes > 0) &&
             (!text || (r.benchmark + ' ' + r.metric).toLowerCase().indexOf(text) >= 0);
    });
    rows.sort(function (a, b) {
      if ((b.changes > 0) !== (a.changes > 0)) return (b.changes > 0) - (a.changes > 0);
      var sa = Math.abs(a.last_step || 0), sb = Math.abs(b.last_step || 0);
      if (sa !== sb) return sb - sa;
      return a.benchmark < b.benchmark ? -1 : a.benchmark > b.benchmark ? 1 : (a.metric < b.metric ? -1 : 1);
    });
    return rows;
  }
  function options(list, selected, all) {
    return '<option value="">' + all + '</option>' + list.map(function (name, i) {
      return '<option value="' + i + '"' + (String(i) === selected ? ' selected' : '') + '>' + esc(name) + '</option>';
    }).join('');
  }
  function facts(r) {
    var f = [esc(index.classes[r.class].name), r.points + ' sessions'];
    if (r.changes) f.push(r.changes + ' change point' + (r.changes > 1 ? 's' : '') + ', last ' + changeSpan(r.last_step, r.kind));
    if (r.noise !== undefined) f.push('noise ' + (100 * r.noise).toFixed(2) + '%');
    if (r.baseline !== undefined) f.push('baseline stored');
    return f.join(' &middot; ');
  }
  function overview(q) {
    var rows = matching(q);
    var page = Math.max(0, parseInt(q.page || '0', 10) || 0);
    var pages = Math.max(1, Math.ceil(rows.length / PAGE));
    if (page >= pages) page = pages - 1;
    var shown = rows.slice(page * PAGE, page * PAGE + PAGE);
    var classNames = index.classes.map(function (c) { return c.name + ' (' + c.sessions + ' sessions)'; });
    var html = '<div class="filters">' +
      '<label>class <select id="f-class">' + options(classNames, q.class || '', 'every class') + '</select></label>' +
      '<label>suite <select id="f-suite">' + options(index.suites, q.suite || '', 'every suite') + '</select></label>' +
      '<label>benchmark <input type="text" id="f-text" value="' + esc(q.q || '') + '" placeholder="name contains"></label>' +
      '<label><input type="checkbox" id="f-changes"' + (q.changes ? ' checked' : '') + '> only with change points</label>' +
      '</div>' +
      '<p class="legend">' + rows.length + ' of ' + index.series.length + ' series. Each plot: session medians (blue) with ' +
      'their spread (the lowest and highest process-run median, bars), the level between change points (purple), change ' +
      'points (red), the stored baseline (dashed), the learned band (green, \u00b12 learned SDs). Series with change points first.</p>' +
      pager(q, page, pages) + '<div class="grid">' +
      shown.map(function (r) {
        return '<div class="card"><h3><a href="#/series/' + r.id + '">' + esc(r.benchmark) + '</a> &middot; ' + esc(r.metric) +
               '</h3><div class="facts">' + facts(r) + '</div><div style="height:200px"><canvas id="c' + r.id + '"></canvas></div></div>';
      }).join('') + '</div>' + pager(q, page, pages) + suiteChanges(q);
    document.getElementById('view').innerHTML = html;
    bindFilters(q);
    return draw(shown, false);
  }
  function suiteChanges(q) {
    var list = (index.suite_changes || []).filter(function (c) { return q.class === undefined || q.class === '' || String(c.class) === q.class; });
    if (!list.length) return '';
    return '<h2>Changes of a whole suite (common mode)</h2><table><tr><th>class</th><th>suite</th><th>commits</th><th>time</th><th>step</th></tr>' +
      list.map(function (c) {
        return '<tr><td>' + esc(index.classes[c.class].name) + '</td><td>' + esc(c.suite) + '</td><td>' + commitLink(c.previous) + '..' +
               commitLink(c.commit) + '</td><td>' + esc(c.time) + '</td><td class="num">' + changeSpan(c.step, 'latency') + '</td></tr>';
      }).join('') + '</table>';
  }
  function pager(q, page, pages) {
    if (pages <= 1) return '';
    var prev = Object.assign({}, q, { page: page - 1 }), next = Object.assign({}, q, { page: page + 1 });
    return '<div class="pager">' + (page > 0 ? '<a href="' + overviewHash(prev) + '">&larr; previous</a>' : '') +
           '<span>page ' + (page + 1) + ' of ' + pages + '</span>' +
           (page + 1 < pages ? '<a href="' + overviewHash(next) + '">next &rarr;</a>' : '') + '</div>';
  }
  function bindFilters(q) {
    function go(change) { location.hash = overviewHash(Object.assign({}, q, change, { page: '' })); }
    document.getElementById('f-class').onchange = function (e) { go({ class: e.target.value }); };
    document.getElementById('f-suite').onchange = function (e) { go({ suite: e.target.value }); };
    document.getElementById('f-text').onchange = function (e) { go({ q: e.target.value }); };
    document.getElementById('f-changes').onchange = function (e) { go({ changes: e.target.checked ? '1' : '' }); };
  }
  function draw(rows, big) {
    var needs = [];
    rows.forEach(function (r) { needs.push(loadSessions(r.class)); needs.push(loadChunk(r.chunk)); });
    return Promise.all(needs).then(function () {
      rows.forEach(function (r) { plot(document.getElementById('c' + r.id), r, chunks[r.chunk].series[r.id], big); });
    });
  }

  // ---- one benchmark ---------------------------------------------------------------------------
  function seriesView(id) {
    var row = index.series.filter(function (r) { return r.id === id; })[0];
    if (!row) throw new Error('no series ' + id);
    var metrics = index.series.filter(function (r) { return r.class === row.class && r.benchmark === row.benchmark; });
    metrics.sort(function (a, b) { return a.id === id ? -1 : b.id === id ? 1 : (a.metric < b.metric ? -1 : 1); });
    var html = '<p><a href="' + overviewHash({ class: String(row.class), suite: String(row.suite) }) + '">&larr; ' +
               esc(index.suites[row.suite]) + ' on ' + esc(index.classes[row.class].name) + '</a></p>' +
               '<h2>' + esc(row.benchmark) + '</h2>' +
               metrics.map(function (r) {
                 return '<div class="big"><h3>' + esc(r.metric) + ' <small>(' + esc(r.kind) + ')</small></h3><div class="facts">' +
                        facts(r) + '</div><div style="height:360px"><canvas id="c' + r.id + '"></canvas></div><div id="t' + r.id + '"></div></div>';
               }).join('');
    document.getElementById('view').innerHTML = html;
    return draw(metrics, true).then(function () {
      metrics.forEach(function (r) { document.getElementById('t' + r.id).innerHTML = changeTable(r, chunks[r.chunk].series[r.id]); });
    });
  }
  function changeTable(row, d) {
    var s = sessions[row.class];
    var rows = d.changes.map(function (c) {
      return '<tr><td>' + commitLink(c.previous) + '..' + commitLink(c.commit) + '</td><td>' + esc(c.time) +
             '</td><td class="num">' + changeSpan(c.step, row.kind) + '</td><td class="num">' + changeSpan(c.cumulative, row.kind) +
             '</td><td class="num">' + c.p.toPrecision(2) + '</td></tr>';
    }).join('');
    var band = d.band ? '<p class="legend">Learned noise: ' + (100 * d.band.relative_sd).toFixed(2) + '% (relative SD of a session median, from ' +
      d.band.sessions + ' sessions' + (d.band.sufficient ? '' : ', too few to replace the prior') + '). Latest session: ' +
      commitLink(s.commit[d.s[d.s.length - 1]]) + ' at ' + esc(s.time[d.s[d.s.length - 1]]) + '.</p>' : '';
    if (!rows) return band + '<p class="legend">No change point.</p>';
    return band + '<table><tr><th>commits (bisect range)</th><th>time</th><th>step</th><th>cumulative</th><th>p</th></tr>' + rows + '</table>';
  }

  function route() {
    reset();
    var p = params();
    var m = /^series\/(\d+)$/.exec(p.path);
    var work;
    try {
      work = m ? seriesView(parseInt(m[1], 10)) : overview(p.q);
    } catch (e) {
      failed(e);
      return Promise.resolve();
    }
    return Promise.resolve(work).then(function () { done(m ? 'series' : 'overview'); }).catch(failed);
  }

  return {
    index: function (data) {
      index = data;
      function start() {
        document.getElementById('source').textContent = 'history ' + data.history + ' \u00b7 written ' + data.generated;
        window.addEventListener('hashchange', route);
        route();
      }
      if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start); else start();
    },
    sessions: function (data) { sessions[data.k] = data.sessions; arrived('data/sessions-' + data.k + '.js'); },
    chunk: function (data) {
      Object.keys(data.series).forEach(function (id) { expand(data.series[id]); });
      chunks[data.k] = data;
      arrived('data/chunk-' + data.k + '.js');
    }
  };
})();
