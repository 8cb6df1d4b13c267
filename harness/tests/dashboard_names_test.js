// ctest dashboard.names: the dashboard's esc() (harness/src/report/dashboard/dashboard.js, the script every page
// runs) on hostile benchmark names: HTML is escaped, and characters that reorder, hide or break text are shown
// as <U+XXXX>, so that no name can read as another in the overview, the change table or a series' heading.
//
//   node dashboard_names_test.js harness/src/report/dashboard/dashboard.js
'use strict';
const fs = require('fs');
const source = fs.readFileSync(process.argv[2], 'utf8');
const match = source.match(/function esc\(text\) \{[\s\S]*?\n  \}/);
if (!match) { console.error('FAIL: no function esc(text) in ' + process.argv[2]); process.exit(1); }
const esc = new Function(match[0] + '\nreturn esc;')();
let failures = 0;
function expect(input, wanted) {
  const got = esc(input);
  if (got !== wanted) { console.error('FAIL: esc(' + JSON.stringify(input) + ') = ' + JSON.stringify(got) + ', wanted ' + JSON.stringify(wanted)); failures++; }
}
expect('gemm/evil\u202Enuf', 'gemm/evil&lt;U+202E&gt;nuf');                  // right-to-left override
expect('a\u2066b\u2069c\u200Fd\u061Ce', 'a&lt;U+2066&gt;b&lt;U+2069&gt;c&lt;U+200F&gt;d&lt;U+061C&gt;e');
expect('zero\u200Bwidth\uFEFF', 'zero&lt;U+200B&gt;width&lt;U+FEFF&gt;');
expect('line\nbreak\u2028sep\u0085', 'line&lt;U+000A&gt;break&lt;U+2028&gt;sep&lt;U+0085&gt;');
expect('<img src=x onerror=alert(1)>&"\'', '&lt;img src=x onerror=alert(1)&gt;&amp;&quot;&#39;');
expect('caf\u00e9/\u4e2d\u6587', 'caf\u00e9/\u4e2d\u6587');                  // ordinary text is kept
if (failures) process.exit(1);
console.log('ok: esc() escapes HTML and shows control, bidirectional and invisible characters');
