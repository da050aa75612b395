// Builds ../../static/plotly/plotly-headway.min.js from index.js, the way plotly.js builds its
// own dist bundles (its esbuild-config.js, tasks/util/bundle_wrapper.mjs and
// tasks/compress_attributes.js at the pinned version): esbuild IIFE, attribute descriptions
// stripped, minified, wrapped so that the bundle sets `window.Plotly`.
// Run with `npm ci && npm run build` in this folder; the output depends only on package-lock.json.
import { build, transformSync } from 'esbuild';
import { environmentPlugin } from 'esbuild-plugin-environment';
import InlineCSSPlugin from 'esbuild-plugin-inline-css';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const out = path.join(here, '..', '..', 'static', 'plotly', 'plotly-headway.min.js');
const version = require('plotly.js/package.json').version;

// plotly.js's compress_attributes transform: the schema's prose (description, hrName, ...) is
// only for plot-schema.json, never read when drawing. The patterns match whole string literals
// (and the comments between them), so a quote or bracket inside a description cannot cut one
// short; a file whose stripped text would not parse is bundled as it is.
const str = `(?:'(?:[^'\\\\\n]|\\\\.)*'|"(?:[^"\\\\\n]|\\\\.)*")`;
const strings = `(?:\\s|${str}|//[^\\n]*|,|\\+)*`;
const stringRe = (attr) => new RegExp(`\\s*${attr}:\\s*${str}(?:\\s*\\+\\s*${str})*\\s*,?`, 'g');
const joinedRe = (attr) => new RegExp(`\\s*${attr}:\\s*\\[${strings}\\]\\.join\\(\\s*${str}\\s*\\)\\s*,?`, 'g');
const arrayRe = (attr) => new RegExp(`\\s*${attr}:\\s*\\[${strings}\\]\\s*,?`, 'g');
const stripped = { files: 0, kept: [] };
const compressAttributes = {
    name: 'compress-attributes',
    setup(b) {
        b.onLoad({ filter: /[\\/]node_modules[\\/]plotly\.js[\\/](src|lib)[\\/].*\.js$/ }, (args) => {
            const source = readFileSync(args.path, 'utf8');
            const contents = source
                .replace(joinedRe('description'), '')
                .replace(stringRe('description'), '')
                .replace(arrayRe('requiredOpts'), '')
                .replace(arrayRe('otherOpts'), '')
                .replace(stringRe('hrName'), '');
            if (contents === source) return { contents: source, loader: 'js' };
            try {
                transformSync(contents, { loader: 'js' });
            } catch {
                stripped.kept.push(path.relative(here, args.path));
                return { contents: source, loader: 'js' };
            }
            stripped.files += 1;
            return { contents, loader: 'js' };
        });
    },
};

const result = await build({
    entryPoints: [path.join(here, 'index.js')],
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    sourcemap: false,
    write: false,
    outfile: out,
    plugins: [InlineCSSPlugin(), environmentPlugin({ NODE_DEBUG: false }), compressAttributes],
    alias: { regl: '@plotly/regl' },
    define: { global: 'window', 'define.amd': 'false' },
    target: 'es2016',
    logLevel: 'warning',
});

const js = result.outputFiles.find((f) => f.path.endsWith('.js')).text;
const header = [
    '/**',
    `* plotly.js (strict partial: scatter, bar, parcoords, scattergl - minified) v${version}`,
    '* Copyright 2012-2026, Plotly, Inc.',
    '* All rights reserved.',
    '* Licensed under the MIT license',
    '*/',
    '(',
    ' function(root, factory) {',
    '  if (typeof module === "object" && module.exports) {',
    '   module.exports = factory();',
    '  } else {',
    '   root.moduleName = factory();',
    '  }',
    '} (typeof self !== "undefined" ? self : this, () => {',
    '',
].join('\n');
const footer = ['', 'window.Plotly = Plotly;', 'return Plotly;', '}));', ''].join('\n');
const bundle = header + js + footer;
writeFileSync(out, bundle);
const sha = createHash('sha256').update(bundle).digest('hex');
console.log(`attribute prose stripped from ${stripped.files} files (left whole: ${stripped.kept.join(', ') || 'none'})`);
console.log(`${path.relative(process.cwd(), out)}: ${bundle.length} bytes, sha256 ${sha}`);
