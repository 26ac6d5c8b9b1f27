/*!
 * chartjs-chart-sankey v0.19.1
 * https://chartjs-chart-sankey.pages.dev/
 * (c) 2026 Jukka Kurkela
 * Released under the MIT license
 */
import { DatasetController, Chart, Element } from './chart-esm.mjs';
import { toFont, valueOrDefault, color, getHoverColor } from './chart-esm.mjs';

const defined = (x)=>x !== undefined;
function toTextLines(raw) {
    if (!raw) return [];
    const lines = [];
    const inputs = Array.isArray(raw) ? raw : [
        raw
    ];
    while(inputs.length){
        const input = inputs.pop();
        if (typeof input === 'string') {
            lines.unshift(...input.split('\n'));
        } else if (Array.isArray(input)) {
            inputs.push(...input);
        } else if (input) {
            lines.unshift(`${input}`);
        }
    }
    return lines;
}
function validateSizeValue(size) {
    if (!size || [
        'min',
        'max'
    ].indexOf(size) === -1) {
        return 'max';
    }
    return size;
}

function isPatternOrGradient(value) {
    const type = Object.prototype.toString.call(value);
    return type === '[object CanvasPattern]' || type === '[object CanvasGradient]';
}
function resolveNodeOption(option, node) {
    if (typeof option === 'function') {
        return option(node);
    }
    if (option && typeof option === 'object' && !isPatternOrGradient(option)) {
        return option[node.key];
    }
    return option;
}
function addRoundedRectPath(ctx, x, y, width, height, radius) {
    const r = Math.max(0, Math.min(radius, width / 2, height / 2));
    ctx.beginPath();
    ctx.moveTo(x + r, y);
    ctx.lineTo(x + width - r, y);
    ctx.quadraticCurveTo(x + width, y, x + width, y + r);
    ctx.lineTo(x + width, y + height - r);
    ctx.quadraticCurveTo(x + width, y + height, x + width - r, y + height);
    ctx.lineTo(x + r, y + height);
    ctx.quadraticCurveTo(x, y + height, x, y + height - r);
    ctx.lineTo(x, y + r);
    ctx.quadraticCurveTo(x, y, x + r, y);
    ctx.closePath();
}
function resolvePosition(position, autoPosition) {
    return position === 'auto' ? autoPosition : position;
}
function getTextPosition(position, options, totalTextHeight) {
    const { borderWidth, height, padding, width, x, y } = options;
    const text = {
        align: 'center',
        x: x + width / 2,
        y: y + height / 2
    };
    if (position === 'left') {
        text.align = 'right';
        text.x = x - borderWidth - padding;
    } else if (position === 'right') {
        text.align = 'left';
        text.x = x + width + borderWidth + padding;
    } else if (position === 'top') {
        text.y = y - padding - totalTextHeight / 2;
    } else if (position === 'bottom') {
        text.y = y + height + padding + totalTextHeight / 2;
    }
    return text;
}
function getBackgroundX(textAlign, textX, textWidth, backgroundWidth, padding) {
    if (textAlign === 'left') return textX - padding;
    if (textAlign === 'right') return textX - textWidth - padding;
    return textX - backgroundWidth / 2;
}
function drawBackground(ctx, color, x, y, width, height, borderRadius) {
    ctx.save();
    ctx.fillStyle = color;
    if (borderRadius > 0) {
        addRoundedRectPath(ctx, x, y, width, height, borderRadius);
        ctx.fill();
    } else {
        ctx.fillRect(x, y, width, height);
    }
    ctx.restore();
}
function drawLabel(ctx, label, options) {
    const lines = toTextLines(label);
    if (!lines.length) return;
    const { backgroundColor, borderRadius, color, font, lineOffset, padding } = options;
    const position = resolvePosition(options.position, options.autoPosition);
    const textHeight = Number(font.lineHeight);
    ctx.font = font.string;
    const textWidth = Math.max(...lines.map((line)=>ctx.measureText(line).width));
    const totalTextHeight = textHeight * lines.length;
    const text = getTextPosition(position, options, totalTextHeight);
    ctx.textAlign = text.align;
    ctx.textBaseline = 'middle';
    const backgroundWidth = textWidth + padding * 2;
    const backgroundHeight = totalTextHeight + padding * 2;
    const backgroundX = getBackgroundX(text.align, text.x, textWidth, backgroundWidth, padding);
    const firstLineY = lines.length === 1 ? text.y : text.y - totalTextHeight / 2 + lineOffset;
    const textCenterY = firstLineY + (lines.length - 1) * textHeight / 2;
    const backgroundY = textCenterY - backgroundHeight / 2;
    if (backgroundColor !== undefined) {
        drawBackground(ctx, backgroundColor, backgroundX, backgroundY, backgroundWidth, backgroundHeight, borderRadius);
    }
    ctx.fillStyle = color;
    for(let i = 0; i < lines.length; i++){
        ctx.fillText(lines[i], text.x, firstLineY + i * textHeight);
    }
}

const flowSort = (a, b)=>{
    if (b.flow === a.flow) return a.index - b.index;
    return b.flow - a.flow;
};
const setSizes = (nodes, size)=>{
    const sizeMethod = validateSizeValue(size);
    for (const node of nodes.values()){
        node.from.sort(flowSort);
        node.to.sort(flowSort);
        node.size = Math[sizeMethod](node.in || node.out, node.out || node.in);
    }
};
const setPriorities = (nodes, priority)=>{
    if (!priority) return;
    for (const node of nodes.values()){
        if (node.key in priority) {
            node.priority = priority[node.key];
        }
    }
};
const setColumns = (nodes, column)=>{
    if (!column) return;
    for (const node of nodes.values()){
        if (node.key in column) {
            node.column = true;
            node.x = column[node.key];
        }
    }
};
const getParsedData = (data, parsing)=>{
    const { from: fromKey = 'from', to: toKey = 'to', flow: flowKey = 'flow' } = parsing;
    return data.map(({ [fromKey]: from, [toKey]: to, [flowKey]: flow })=>({
            flow,
            from,
            to
        }));
};
function buildNodesFromData(data, { size, priority, column }) {
    const nodes = new Map();
    for(let i = 0; i < data.length; i++){
        const { from, to, flow } = data[i];
        const fromNode = nodes.get(from) ?? {
            from: [],
            in: 0,
            key: from,
            out: 0,
            size: 0,
            to: []
        };
        const toNode = (from === to ? fromNode : nodes.get(to)) ?? {
            from: [],
            in: 0,
            key: to,
            out: 0,
            size: 0,
            to: []
        };
        fromNode.out += flow;
        fromNode.to.push({
            addY: 0,
            flow: flow,
            index: i,
            key: to,
            node: toNode
        });
        if (fromNode.to.length === 1) {
            nodes.set(from, fromNode);
        }
        toNode.in += flow;
        toNode.from.push({
            addY: 0,
            flow: flow,
            index: i,
            key: from,
            node: fromNode
        });
        if (toNode.from.length === 1) {
            nodes.set(to, toNode);
        }
    }
    setSizes(nodes, size);
    setPriorities(nodes, priority);
    setColumns(nodes, column);
    return nodes;
}

const SMALL_VALUE = 1e-6;
function nodeX$1(node) {
    return node.x ?? 0;
}
function nodeY$1(node) {
    return node.y ?? 0;
}
 const getAllKeysForward = (nodes, visited = new Set())=>{
    const keys = [];
    for (const node of nodes){
        if (visited.has(node.key)) continue;
        visited.add(node.key);
        keys.push(node.key, ...getAllKeysForward(node.to.map((to)=>to.node), visited));
    }
    return keys;
};
 const startColumn = (data, nodes)=>{
    const startNodes = nodes.filter((node)=>node.from.length === 0);
    const column = startNodes.map((node)=>node.key);
    const startRef = getAllKeysForward(startNodes);
    const referencedNodes = new Set(startRef);
    for (const point of data){
        if (!referencedNodes.has(point.from) && !referencedNodes.has(point.to)) {
            column.push(point.from);
            referencedNodes.add(point.from);
        }
        referencedNodes.add(point.to);
    }
    return column;
};
 const nextColumn = (dataWithoutDirectLoops, remainingKeys)=>{
    const remainingTo = new Set(dataWithoutDirectLoops.filter((flow)=>remainingKeys.has(flow.from)).map((flow)=>flow.to));
    const remainingKeyArray = [
        ...remainingKeys
    ];
    const columnsNotInTo = remainingKeyArray.filter((key)=>!remainingTo.has(key));
    return columnsNotInTo.length ? columnsNotInTo : remainingKeyArray.slice(0, 1);
};
function calculateX(nodeMap, data, mode) {
    const dataWithoutDirectLoops = data.filter((dp)=>dp.from !== dp.to);
    const allKeys = [
        ...nodeMap.keys()
    ];
    const allNodes = [
        ...nodeMap.values()
    ];
    const keysToPlace = new Set(allKeys);
    let x = 0;
    while(keysToPlace.size){
        const column = x === 0 ? startColumn(data, allNodes) : nextColumn(dataWithoutDirectLoops, keysToPlace);
        if (!column.length) {
            throw new Error('Fatal error: Unable to place nodes to columns. Please report this issue.');
        }
        for (const key of column){
            const node = nodeMap.get(key);
            if (node && !defined(node.x)) {
                node.x = x;
            }
            keysToPlace.delete(key);
        }
        if (keysToPlace.size) {
            x++;
        }
    }
    const maxX = allNodes.reduce((max, node)=>Math.max(max, nodeX$1(node)), 0);
    if (mode === 'edge') {
        const from = new Set(data.map((dataPoint)=>dataPoint.from));
        allKeys.filter((key)=>!from.has(key)).forEach((key)=>{
            const node = nodeMap.get(key);
            if (node && !node.column) {
                node.x = maxX;
            }
        });
    }
    return maxX;
}
function nodeCount(list, prop, seen = new Set()) {
    let count = 0;
    for (const elem of list){
        if (seen.has(elem.node)) {
            continue;
        }
        seen.add(elem.node);
        count += elem.node[prop].length + nodeCount(elem.node[prop], prop, seen);
    }
    return count;
}
const flowByNodeCount = (prop)=>(a, b)=>nodeCount(a.node[prop], prop) - nodeCount(b.node[prop], prop) || a.node[prop].length - b.node[prop].length;
function processFrom(node, y) {
    if (!node.from.length) return y;
    node.from.sort(flowByNodeCount('from'));
    for (const flow of node.from){
        const n = flow.node;
        if (!defined(n.y)) {
            n.y = y;
            processFrom(n, y ? y + SMALL_VALUE : 0);
        }
        y = Math.max(n.y + n.out, y);
    }
    return nodeY$1(node) + node.size;
}
const returnsToNearerColumn = (current, next)=>Boolean(next && nodeX$1(next) < nodeX$1(current));
function processTo(node, y) {
    if (!node.to.length) return y;
    node.to.sort(flowByNodeCount('to'));
    for(let i = 0; i < node.to.length; i++){
        const flow = node.to[i];
        const n = flow.node;
        if (!defined(n.y)) {
            n.y = y;
            processTo(n, y ? y + SMALL_VALUE : 0);
        }
        if (returnsToNearerColumn(n, node.to[i + 1]?.node)) {
            y += flow.flow;
        } else {
            y = Math.max(n.y + Math.max(n.in, n.out), y);
        }
    }
    return nodeY$1(node) + node.size;
}
function setOrGetY(node, value) {
    if (defined(node.y)) {
        return node.y;
    }
    node.y = value;
    return value;
}
function processRest(nodeArray, maxX) {
    const leftNodes = nodeArray.filter((node)=>node.x === 0);
    const rightNodes = nodeArray.filter((node)=>node.x === maxX);
    const leftToDo = leftNodes.filter((node)=>!defined(node.y));
    const rightToDo = rightNodes.filter((node)=>!defined(node.y));
    const centerToDo = nodeArray.filter((node)=>nodeX$1(node) > 0 && nodeX$1(node) < maxX && !defined(node.y));
    let leftY = leftNodes.reduce((acc, cur)=>Math.max(acc, nodeY$1(cur) + cur.out || 0), 0) + SMALL_VALUE;
    let rightY = rightNodes.reduce((acc, cur)=>Math.max(acc, nodeY$1(cur) + cur.in || 0), 0) + SMALL_VALUE;
    let centerY = 0;
    if (leftY >= rightY) {
        leftToDo.forEach((node)=>{
            leftY = setOrGetY(node, leftY);
            leftY = Math.max(leftY + node.out, processTo(node, leftY));
        });
        rightToDo.forEach((node)=>{
            rightY = setOrGetY(node, rightY);
            rightY = Math.max(rightY + node.in, processFrom(node, rightY));
        });
    } else {
        leftToDo.forEach((node)=>{
            leftY = setOrGetY(node, leftY);
        });
        rightToDo.forEach((node)=>{
            rightY = setOrGetY(node, rightY);
            rightY = Math.max(rightY + node.in, processFrom(node, rightY));
        });
    }
    centerToDo.forEach((node)=>{
        let y = nodeArray.filter((n)=>nodeX$1(n) === nodeX$1(node) && defined(n.y)).reduce((acc, cur)=>Math.max(acc, nodeY$1(cur) + Math.max(cur.in, cur.out)), 0);
        y = setOrGetY(node, y);
        y = Math.max(y + node.in, processFrom(node, y));
        y = Math.max(y + node.out, processTo(node, y));
        centerY = Math.max(centerY, y);
    });
    return Math.max(leftY, rightY, centerY);
}
const fixTop = (nodeArray, maxX)=>{
    let maxY = 0;
    for(let x = 0; x <= maxX; x++){
        const nodes = nodeArray.filter((n)=>nodeX$1(n) === x).sort((a, b)=>nodeY$1(a) - nodeY$1(b));
        let minY = 0;
        for (const node of nodes){
            if (nodeY$1(node) < minY) node.y = minY;
            minY = nodeY$1(node) + node.size;
        }
        maxY = Math.max(maxY, minY);
    }
    return maxY;
};
const findStartNode = (nodeArray, maxX)=>{
    const sorted = [
        ...nodeArray
    ].sort((a, b)=>a.size - b.size);
    const largest = sorted[sorted.length - 1];
    const size = largest.size;
    const biggest = nodeArray.filter((n)=>n.size === size);
    const first = biggest[0];
    if (biggest.length === 1) return first;
    biggest.sort((a, b)=>nodeX$1(a) - nodeX$1(b));
    if (nodeX$1(first) === 0) return first;
    const last = biggest[biggest.length - 1];
    if (nodeX$1(last) === maxX) return last;
    const mid = Math.floor(biggest.length / 2);
    return biggest[mid];
};
function calculateY(nodeArray, maxX) {
    if (!nodeArray.length) return 0;
    const start = findStartNode(nodeArray, maxX);
    start.y = 0;
    processFrom(start, 0);
    processTo(start, 0);
    processRest(nodeArray, maxX);
    return fixTop(nodeArray, maxX);
}
function calculateYUsingPriority(nodeArray, maxX) {
    let maxY = 0;
    let nextYStart = 0;
    for(let x = 0; x <= maxX; x++){
        let y = nextYStart;
        const nodes = nodeArray.filter((node)=>nodeX$1(node) === x).sort((a, b)=>(a.priority ?? 0) - (b.priority ?? 0));
        if (nodes.length) {
            const nextX = nodeArray.reduce((next, node)=>nodeX$1(node) > x ? Math.min(next, nodeX$1(node)) : next, Infinity);
            nextYStart = nodes[0].to.filter((to)=>nodeX$1(to.node) > nextX).reduce((acc, cur)=>acc + cur.flow, 0) || 0;
        }
        for (const node of nodes){
            node.y = y;
            y += Math.max(node.out, node.in);
        }
        maxY = Math.max(y, maxY);
    }
    return maxY;
}
const nodeByXYSize = (a, b)=>{
    if (nodeX$1(a) !== nodeX$1(b)) return nodeX$1(a) - nodeX$1(b);
    if (nodeY$1(a) === nodeY$1(b)) return a.size - b.size;
    return nodeY$1(a) - nodeY$1(b);
};
function createColumnGapState() {
    return {
        lastAfter: 0,
        lastExtraHalf: 0,
        realCount: 0,
        realCumOffset: 0,
        yHistory: []
    };
}
 function extraHalfFor(node, minSizes, scale) {
    const minSizeUnits = (minSizes.get(node.key) ?? 0) * scale;
    return Math.max(0, minSizeUnits - node.size) / 2;
}
 function stretchedSize(node, minSizes, scale) {
    const minSizeUnits = (minSizes.get(node.key) ?? 0) * scale;
    return Math.max(node.size, minSizeUnits);
}
function countCrossColumnPaddings(grid, colIdx, y, ownPaddings) {
    let paddings = ownPaddings;
    for(let col = 0; col < colIdx; col++){
        const otherHistory = grid[col].yHistory;
        for(let row = 0; row < otherHistory.length; row++){
            if (otherHistory[row] > y) break;
            paddings = Math.max(row + 1, paddings);
        }
    }
    return paddings;
}
function offsetForNode(state, gap, paddings, scale, extraHalf) {
    const realNodesAbove = state.realCount;
    const before = gap.before * scale;
    const after = gap.after * scale;
    const transitionGap = realNodesAbove > 0 ? Math.max(state.lastAfter, before) + state.lastExtraHalf + extraHalf : 0;
    const realCumOffset = state.realCumOffset + transitionGap;
    const virtualLevels = paddings - realNodesAbove;
    state.realCount = realNodesAbove + 1;
    state.realCumOffset = realCumOffset;
    state.lastAfter = after;
    state.lastExtraHalf = extraHalf;
    return realCumOffset + virtualLevels * before;
}
 function addEvenPadding(nodeArray, gaps, scale, minSizes) {
    let maxY = 0;
    let columnX;
    let prev;
    let prevGap;
    let prevExtraHalf = 0;
    for (const node of nodeArray){
        const x = nodeX$1(node);
        const gap = gaps.get(node.key) ?? {
            after: 0,
            before: 0
        };
        const extraHalf = extraHalfFor(node, minSizes, scale);
        if (x !== columnX) {
            columnX = x;
        } else if (prev && prevGap) {
            node.y = nodeY$1(prev) + prev.size + Math.max(prevGap.after, gap.before) * scale + prevExtraHalf + extraHalf;
        }
        prev = node;
        prevGap = gap;
        prevExtraHalf = extraHalf;
        const H = stretchedSize(node, minSizes, scale);
        maxY = Math.max(maxY, nodeY$1(node) + Math.max(node.in, node.out), nodeY$1(node) + (node.size + H) / 2);
    }
    return maxY;
}
 function addPadding(nodeArray, gaps, scale = 1, mode = 'auto', minSizes = new Map()) {
    nodeArray.sort(nodeByXYSize);
    if (mode === 'even') {
        return addEvenPadding(nodeArray, gaps, scale, minSizes);
    }
    let maxY = 0;
    const columnXs = new Map();
    const grid = [];
    const getColIndex = (x)=>{
        if (!columnXs.has(x)) {
            const index = grid.length;
            columnXs.set(x, index);
            grid.push(createColumnGapState());
            return index;
        }
        return columnXs.get(x) ?? 0;
    };
    for (const node of nodeArray){
        const colIdx = getColIndex(nodeX$1(node));
        const state = grid[colIdx];
        const gap = gaps.get(node.key) ?? {
            after: 0,
            before: 0
        };
        const y = nodeY$1(node);
        const extraHalf = extraHalfFor(node, minSizes, scale);
        if (y) {
            state.yHistory.push(y);
            let paddings = state.yHistory.length;
            if (node.in) {
                paddings = countCrossColumnPaddings(grid, colIdx, y, paddings);
                while(state.yHistory.length < paddings)state.yHistory.push(y);
            }
            node.y = y + offsetForNode(state, gap, paddings, scale, extraHalf);
        } else {
            state.realCount += 1;
            state.lastAfter = gap.after * scale;
            state.lastExtraHalf = extraHalf;
        }
        const H = stretchedSize(node, minSizes, scale);
        maxY = Math.max(maxY, nodeY$1(node) + Math.max(node.in, node.out), nodeY$1(node) + (node.size + H) / 2);
    }
    return maxY;
}
function sortFlows(nodeArray) {
    nodeArray.forEach((node)=>{
        const nodeSize = node.size;
        const overlapFrom = nodeSize < node.in;
        const overlapTo = nodeSize < node.out;
        let addY = 0;
        let len = node.from.length;
        node.from.sort((a, b)=>nodeY$1(a.node) + a.node.out / 2 - (nodeY$1(b.node) + b.node.out / 2)).forEach((flow, idx)=>{
            if (overlapFrom) {
                flow.addY = idx * (nodeSize - flow.flow) / (len - 1);
            } else {
                flow.addY = addY;
                addY += flow.flow;
            }
        });
        addY = 0;
        len = node.to.length;
        node.to.sort((a, b)=>nodeY$1(a.node) + a.node.in / 2 - (nodeY$1(b.node) + b.node.in / 2)).forEach((flow, idx)=>{
            if (overlapTo) {
                flow.addY = idx * (nodeSize - flow.flow) / (len - 1);
            } else {
                flow.addY = addY;
                addY += flow.flow;
            }
        });
    });
}
function layout(nodes, data, { priority, height, nodePadding, nodePaddingMode, nodeMinSize, modeX }) {
    const nodeArray = [
        ...nodes.values()
    ];
    const maxX = calculateX(nodes, data, modeX ?? 'edge');
    const maxY = priority ? calculateYUsingPriority(nodeArray, maxX) : calculateY(nodeArray, maxX);
    const scale = maxY / height;
    const maxYWithPadding = addPadding(nodeArray, nodePadding, scale, nodePaddingMode ?? 'auto', nodeMinSize ?? new Map());
    sortFlows(nodeArray);
    return {
        maxX,
        maxY: maxYWithPadding
    };
}

function nodeX(node) {
    return node.x ?? 0;
}
function nodeY(node) {
    return node.y ?? 0;
}
function getNodeSize(node, size) {
    return Math[size](node.in || node.out, node.out || node.in);
}
function getAutoLabelPosition(x, y, chartArea, orientation) {
    if (orientation === 'vertical') {
        return y < (chartArea.top + chartArea.bottom) / 2 ? 'bottom' : 'top';
    }
    return x < (chartArea.left + chartArea.right) / 2 ? 'right' : 'left';
}
function getAddY(arr, key, index) {
    for (const item of arr){
        if (item.key === key && item.index === index) {
            return item.addY;
        }
    }
    return 0;
}
function parseFlow(from, to, fromY, toY, flow, index, xScale, yScale, orientation) {
    if (orientation === 'vertical') {
        return {
            _custom: {
                flow,
                from,
                height: xScale.parse(flow, index),
                to,
                x: xScale.parse(toY, index),
                y: yScale.parse(nodeX(to), index)
            },
            x: xScale.parse(fromY, index),
            y: yScale.parse(nodeX(from), index)
        };
    }
    return {
        _custom: {
            flow,
            from,
            height: yScale.parse(flow, index),
            to,
            x: xScale.parse(nodeX(to), index),
            y: yScale.parse(toY, index)
        },
        x: xScale.parse(nodeX(from), index),
        y: yScale.parse(fromY, index)
    };
}
function getFlowElementProperties(parsed, xScale, yScale, maxColumn, nodeWidth, columnPadding, borderSpace, orientation) {
    const custom = parsed._custom;
    const x = xScale.getPixelForValue(parsed.x);
    const y = yScale.getPixelForValue(parsed.y);
    if (orientation === 'vertical') {
        return {
            flow: custom.flow,
            from: custom.from,
            height: 0,
            to: custom.to,
            width: Math.abs(xScale.getPixelForValue(parsed.x + custom.height) - x),
            x,
            x2: xScale.getPixelForValue(custom.x),
            y: getColumnPixel(yScale, parsed.y, maxColumn, columnPadding) + nodeWidth + borderSpace,
            y2: getColumnPixel(yScale, custom.y, maxColumn, columnPadding) - borderSpace
        };
    }
    return {
        flow: custom.flow,
        from: custom.from,
        height: Math.abs(yScale.getPixelForValue(parsed.y + custom.height) - y),
        to: custom.to,
        width: 0,
        x: getColumnPixel(xScale, parsed.x, maxColumn, columnPadding) + nodeWidth + borderSpace,
        x2: getColumnPixel(xScale, custom.x, maxColumn, columnPadding) - borderSpace,
        y,
        y2: yScale.getPixelForValue(custom.y)
    };
}
function getColumnPixel(scale, value, maxColumn, padding) {
    const pixel = scale.getPixelForValue(value);
    return maxColumn ? pixel - value / maxColumn * padding : pixel;
}
function getColumnPadding(nodeWidth, orientation, chart) {
    const trailingSpace = orientation === 'vertical' ? chart.height - chart.chartArea.bottom : chart.width - chart.chartArea.right;
    return Math.max(0, nodeWidth + 3 - trailingSpace);
}
 function getNodeRect(node, size, xScale, yScale, maxColumn, nodeWidth, columnPadding, orientation, minSize) {
    if (orientation === 'vertical') {
        const x1 = xScale.getPixelForValue(nodeY(node));
        const x2 = xScale.getPixelForValue(nodeY(node) + size);
        const left = Math.min(x1, x2);
        const naturalWidth = Math.abs(x2 - x1);
        const width = Math.max(naturalWidth, minSize);
        return {
            height: nodeWidth,
            width,
            x: left - (width - naturalWidth) / 2,
            y: getColumnPixel(yScale, nodeX(node), maxColumn, columnPadding)
        };
    }
    const y1 = yScale.getPixelForValue(nodeY(node));
    const y2 = yScale.getPixelForValue(nodeY(node) + size);
    const top = Math.min(y1, y2);
    const naturalHeight = Math.abs(y2 - y1);
    const height = Math.max(naturalHeight, minSize);
    return {
        height,
        width: nodeWidth,
        x: getColumnPixel(xScale, nodeX(node), maxColumn, columnPadding),
        y: top - (height - naturalHeight) / 2
    };
}
function resolveNodeGap(option, node) {
    const resolved = resolveNodeOption(option ?? 10, node) ?? 10;
    if (typeof resolved === 'number') {
        return {
            after: resolved,
            before: resolved
        };
    }
    return {
        after: resolved.after ?? 10,
        before: resolved.before ?? 10
    };
}
function resolveNodeMinSize(option, node) {
    return resolveNodeOption(option ?? 0, node) ?? 0;
}
function resolveNodeLabelStyle(options, node) {
    const { backgroundColor, borderRadius = 0, color, display, font, padding = 4, position } = options.nodeLabels ?? {};
    return {
        backgroundColor: resolveNodeOption(backgroundColor, node),
        borderRadius,
        color: resolveNodeOption(color, node) ?? options.color ?? 'black',
        display: resolveNodeOption(display, node) ?? true,
        font,
        padding,
        position: resolveNodeOption(position, node) ?? 'auto'
    };
}
const NODE_SCOPED_OPTIONS = new Set([
    'nodeMinSize',
    'nodePadding'
]);
class SankeyController extends DatasetController {
    parseObjectData(meta, data, start, count) {
        const sankeyData = getParsedData(data, this.options.parsing);
        const { xScale, yScale } = meta;
        const parsed = [];
        const nodes = buildNodesFromData(sankeyData, this.options);
        const orientation = this.options.orientation ?? 'horizontal';
        this._nodes = nodes;
        const nodeGaps = new Map();
        const nodeMinSizes = new Map();
        for (const node of nodes.values()){
            nodeGaps.set(node.key, resolveNodeGap(this.options.nodePadding, node));
            nodeMinSizes.set(node.key, resolveNodeMinSize(this.options.nodeMinSize, node));
        }
        const { maxX, maxY } = layout(nodes, sankeyData, {
            height: orientation === 'vertical' ? this.chart.width : this.chart.height,
            modeX: this.options.modeX,
            nodeMinSize: nodeMinSizes,
            nodePadding: nodeGaps,
            nodePaddingMode: this.options.nodePaddingMode,
            priority: !!this.options.priority
        });
        this._maxX = maxX;
        this._maxY = maxY;
        if (!xScale || !yScale) return [];
        for(let i = 0, ilen = sankeyData.length; i < ilen; ++i){
            const dataPoint = sankeyData[i];
            const from = nodes.get(dataPoint.from);
            const to = nodes.get(dataPoint.to);
            if (!from || !to) continue;
            const fromY = nodeY(from) + getAddY(from.to, dataPoint.to, i);
            const toY = nodeY(to) + getAddY(to.from, dataPoint.from, i);
            parsed.push(parseFlow(from, to, fromY, toY, dataPoint.flow, i, xScale, yScale, orientation));
        }
        return parsed.slice(start, start + count);
    }
    buildOrUpdateElements(resetNewElements) {
        this.configure();
        super.buildOrUpdateElements(resetNewElements);
    }
    getMinMax(scale) {
        const vertical = this.options.orientation === 'vertical';
        const columnScale = vertical ? this._cachedMeta.yScale : this._cachedMeta.xScale;
        return {
            max: scale === columnScale ? this._maxX : this._maxY,
            min: 0
        };
    }
    update(mode) {
        const { data } = this._cachedMeta;
        this.updateElements(data, 0, data.length, mode);
    }
    updateElements(elems, start, count, mode) {
        const { xScale, yScale } = this._cachedMeta;
        if (!xScale || !yScale) return;
        const firstOpts = this.resolveDataElementOptions(start, mode);
        const sharedOptions = this.getSharedOptions(firstOpts);
        const { borderWidth, nodeWidth = 10, orientation = 'horizontal' } = this.options;
        const columnPadding = getColumnPadding(nodeWidth, orientation, this.chart);
        const borderSpace = borderWidth ? borderWidth / 2 + 0.5 : 0;
        for(let i = start; i < start + count; i++){
            const parsed = this.getParsed(i);
            this.updateElement(elems[i], i, {
                options: this.resolveDataElementOptions(i, mode),
                progress: mode === 'reset' ? 0 : 1,
                ...getFlowElementProperties(parsed, xScale, yScale, this._maxX, nodeWidth, columnPadding, borderSpace, orientation)
            }, mode);
        }
        if (sharedOptions) {
            this.updateSharedOptions(sharedOptions, mode, firstOpts);
        }
    }
    _drawLabels() {
        const ctx = this.chart.ctx;
        const options = this.options;
        const nodes = this._nodes || new Map();
        const size = validateSizeValue(options.size);
        const labels = options.labels;
        const { borderWidth = 1, nodeWidth = 10, orientation = 'horizontal' } = options;
        const columnPadding = getColumnPadding(nodeWidth, orientation, this.chart);
        const defaultFont = options.font ?? this.chart.options.font ?? Chart.defaults.font;
        const { xScale, yScale } = this._cachedMeta;
        if (!xScale || !yScale) return;
        ctx.save();
        const chartArea = this.chart.chartArea;
        for (const node of nodes.values()){
            const max = getNodeSize(node, size);
            const minSize = resolveNodeMinSize(options.nodeMinSize, node);
            const { height, width, x, y } = getNodeRect(node, max, xScale, yScale, this._maxX, nodeWidth, columnPadding, orientation, minSize);
            const label = labels?.[node.key] ?? node.key;
            const labelStyle = resolveNodeLabelStyle(options, node);
            if (labelStyle.display) {
                const font = toFont(labelStyle.font ?? defaultFont);
                drawLabel(ctx, label, {
                    autoPosition: getAutoLabelPosition(x, y, chartArea, orientation),
                    backgroundColor: labelStyle.backgroundColor,
                    borderRadius: labelStyle.borderRadius,
                    borderWidth,
                    color: labelStyle.color,
                    font,
                    height,
                    lineOffset: valueOrDefault(options.padding, font.lineHeight / 2),
                    padding: labelStyle.padding,
                    position: labelStyle.position,
                    width,
                    x,
                    y
                });
            }
        }
        ctx.restore();
    }
    _drawNodes() {
        const ctx = this.chart.ctx;
        const nodes = this._nodes || new Map();
        const { borderColor, borderWidth = 0, nodeWidth = 10, orientation = 'horizontal', size } = this.options;
        const columnPadding = getColumnPadding(nodeWidth, orientation, this.chart);
        const sizeMethod = validateSizeValue(size);
        const { xScale, yScale } = this._cachedMeta;
        ctx.save();
        if (borderColor && borderWidth) {
            ctx.strokeStyle = borderColor;
            ctx.lineWidth = borderWidth;
        }
        for (const node of nodes.values()){
            ctx.fillStyle = node.color ?? 'black';
            if (!xScale || !yScale) return;
            const max = Math[sizeMethod](node.in || node.out, node.out || node.in);
            const minSize = resolveNodeMinSize(this.options.nodeMinSize, node);
            const { height, width, x, y } = getNodeRect(node, max, xScale, yScale, this._maxX, nodeWidth, columnPadding, orientation, minSize);
            if (borderWidth) {
                ctx.strokeRect(x, y, width, height);
            }
            ctx.fillRect(x, y, width, height);
        }
        ctx.restore();
    }
 draw() {
        const ctx = this.chart.ctx;
        const data = this.getMeta().data ?? [];
        const active = [];
        for(let i = 0, ilen = data.length; i < ilen; ++i){
            const flow = data[i];
             if (!flow.from || !flow.to) {
                continue;
            }
            flow.from.color = flow.options.colorFrom;
            flow.to.color = flow.options.colorTo;
            if (flow.active) {
                active.push(flow);
            }
        }
        for (const flow of active){
            if (!flow.from || !flow.to) {
                continue;
            }
            flow.from.color = flow.options.colorFrom;
            flow.to.color = flow.options.colorTo;
        }
        this._drawNodes();
        for(let i = 0, ilen = data.length; i < ilen; ++i){
            data[i].draw(ctx);
        }
        this._drawLabels();
    }
    constructor(...args){
        super(...args), this._nodes = new Map(), this._maxX = 0, this._maxY = 0;
    }
}
SankeyController.id = 'sankey';
SankeyController.descriptors = {
    _indexable: false,
    _scriptable: (name)=>!NODE_SCOPED_OPTIONS.has(name),
    nodeLabels: {
        _indexable: false,
        _scriptable: false
    }
};
SankeyController.defaults = {
    animations: {
        colors: {
            properties: [
                'colorFrom',
                'colorTo'
            ],
            type: 'color'
        },
        numbers: {
            properties: [
                'x',
                'y',
                'x2',
                'y2',
                'height',
                'width'
            ],
            type: 'number'
        },
        progress: {
            delay: (ctx)=>ctx.type === 'data' ? ctx.parsed[ctx.dataset.orientation === 'vertical' ? 'y' : 'x'] * 500 + ctx.dataIndex * 20 : undefined,
            duration: (ctx)=>ctx.type === 'data' ? (ctx.parsed._custom[ctx.dataset.orientation === 'vertical' ? 'y' : 'x'] - ctx.parsed[ctx.dataset.orientation === 'vertical' ? 'y' : 'x']) * 200 : undefined,
            easing: 'linear'
        }
    },
    borderColor: 'black',
    borderWidth: 1,
    color: 'black',
    dataElementType: 'flow',
    modeX: 'edge',
    nodeMinSize: 0,
    nodePadding: 10,
    nodePaddingMode: 'auto',
    nodeWidth: 10,
    orientation: 'horizontal',
    transitions: {
        hide: {
            animations: {
                colors: {
                    properties: [
                        'colorFrom',
                        'colorTo'
                    ],
                    to: 'transparent',
                    type: 'color'
                }
            }
        },
        resize: {
            animations: {
                progress: {
                    delay: 0,
                    duration: 0
                }
            }
        },
        show: {
            animations: {
                colors: {
                    from: 'transparent',
                    properties: [
                        'colorFrom',
                        'colorTo'
                    ],
                    type: 'color'
                }
            }
        }
    }
};
SankeyController.overrides = {
    datasets: {
        clip: false,
        parsing: {
            flow: 'flow',
            from: 'from',
            to: 'to'
        }
    },
    interaction: {
        intersect: true,
        mode: 'nearest'
    },
    layout: {
        padding: {
            bottom: 3,
            left: 3,
            right: 13,
            top: 3
        }
    },
    plugins: {
        legend: {
            display: false
        },
        tooltip: {
            callbacks: {
                label (context) {
                    const parsedCustom = context.parsed._custom;
                    return `${parsedCustom.from.key} -> ${parsedCustom.to.key}: ${parsedCustom.flow}`;
                },
                title () {
                    return '';
                }
            }
        }
    },
    scales: {
        x: {
            bounds: 'data',
            display: false,
            min: 0,
            offset: false,
            type: 'linear'
        },
        y: {
            bounds: 'data',
            display: false,
            min: 0,
            offset: false,
            reverse: true,
            type: 'linear'
        }
    }
};

const controlPoints = (x, y, x2, y2, orientation)=>orientation === 'vertical' ? y < y2 ? {
        cp1: {
            x,
            y: y + (y2 - y) / 3 * 2
        },
        cp2: {
            x: x2,
            y: y + (y2 - y) / 3
        }
    } : {
        cp1: {
            x: 0,
            y: y - (y - y2) / 3
        },
        cp2: {
            x: 0,
            y: y2 + (y - y2) / 3
        }
    } : x < x2 ? {
        cp1: {
            x: x + (x2 - x) / 3 * 2,
            y
        },
        cp2: {
            x: x + (x2 - x) / 3,
            y: y2
        }
    } : {
        cp1: {
            x: x - (x - x2) / 3,
            y: 0
        },
        cp2: {
            x: x2 + (x - x2) / 3,
            y: 0
        }
    };
const pointInLine = (p1, p2, t)=>({
        x: p1.x + t * (p2.x - p1.x),
        y: p1.y + t * (p2.y - p1.y)
    });
const applyAlpha = (original, alpha)=>color(original).alpha(alpha).rgbString();
const getColorOption = (option, alpha)=>typeof option === 'string' ? applyAlpha(option, alpha) : option;
const getHoverColorOption = (option)=>typeof option === 'string' ? getHoverColor(option) : option;
function setStyle(ctx, { x, x2, y, y2, options }) {
    let fill = 'black';
    if (options.flowColor !== null) {
        fill = options.flowColor;
    } else if (options.colorMode === 'from') {
        fill = getColorOption(options.colorFrom, options.alpha);
    } else if (options.colorMode === 'to') {
        fill = getColorOption(options.colorTo, options.alpha);
    } else if (typeof options.colorFrom === 'string' && typeof options.colorTo === 'string') {
        fill = options.orientation === 'vertical' ? ctx.createLinearGradient(0, y, 0, y2) : ctx.createLinearGradient(x, 0, x2, 0);
        fill.addColorStop(0, applyAlpha(options.colorFrom, options.alpha));
        fill.addColorStop(1, applyAlpha(options.colorTo, options.alpha));
    }
    ctx.fillStyle = fill;
    ctx.strokeStyle = fill;
    ctx.lineWidth = 0.5;
}
function clipFlow(ctx, { height, width, x, x2, y, y2 }, progress, orientation) {
    ctx.beginPath();
    if (orientation === 'vertical') {
        ctx.rect(Math.min(x, x2), y, Math.abs(x2 - x) + width + 1, (y2 - y) * progress + 1);
    } else {
        ctx.rect(x, Math.min(y, y2), (x2 - x) * progress + 1, Math.abs(y2 - y) + height + 1);
    }
    ctx.clip();
}
function drawFlowPath(ctx, { height, width, x, x2, y, y2 }, { cp1, cp2 }, orientation) {
    ctx.beginPath();
    ctx.moveTo(x, y);
    ctx.bezierCurveTo(cp1.x, cp1.y, cp2.x, cp2.y, x2, y2);
    if (orientation === 'vertical') {
        ctx.lineTo(x2 + width, y2);
        ctx.bezierCurveTo(cp2.x + width, cp2.y, cp1.x + width, cp1.y, x + width, y);
    } else {
        ctx.lineTo(x2, y2 + height);
        ctx.bezierCurveTo(cp2.x, cp2.y + height, cp1.x, cp1.y + height, x, y + height);
    }
    ctx.lineTo(x, y);
    ctx.stroke();
    ctx.closePath();
    ctx.fill();
}
function getLabelRect({ height, width, x, x2, y, y2 }, orientation) {
    if (orientation === 'vertical') {
        return {
            height: y2 - y,
            width: Math.abs(x2 - x) + width,
            x: Math.min(x, x2),
            y
        };
    }
    return {
        height: Math.abs(y2 - y) + height,
        width: x2 - x,
        x,
        y: Math.min(y, y2)
    };
}
class Flow extends Element {
 draw(ctx) {
        const { x, x2, y, y2, height, progress, width } = this;
        const orientation = this.options.orientation;
        const controls = controlPoints(x, y, x2, y2, orientation);
        const geometry = {
            height,
            width,
            x,
            x2,
            y,
            y2
        };
        if (progress === 0) {
            return;
        }
        ctx.save();
        if (progress < 1) {
            clipFlow(ctx, geometry, progress, orientation);
        }
        setStyle(ctx, this);
        drawFlowPath(ctx, geometry, controls, orientation);
        const labels = this.options.flowLabels;
        if (labels.display) {
            const font = toFont(labels.font ?? Chart.defaults.font);
            const labelRect = getLabelRect(geometry, orientation);
            drawLabel(ctx, `${this.flow}`, {
                autoPosition: 'center',
                backgroundColor: labels.backgroundColor,
                borderRadius: labels.borderRadius,
                borderWidth: 0,
                color: labels.color,
                font,
                height: labelRect.height,
                lineOffset: font.lineHeight / 2,
                padding: labels.padding,
                position: labels.position,
                width: labelRect.width,
                x: labelRect.x,
                y: labelRect.y
            });
        }
        ctx.restore();
    }
 inRange(mouseX, mouseY, useFinalPosition) {
        const { x, y, x2, y2, height, width } = this.getProps([
            'x',
            'y',
            'x2',
            'y2',
            'height',
            'width'
        ], useFinalPosition);
        const vertical = this.options.orientation === 'vertical';
        if (vertical ? mouseY < y || mouseY > y2 : mouseX < x || mouseX > x2) return false;
        const { cp1, cp2 } = controlPoints(x, y, x2, y2, this.options.orientation);
        const t = vertical ? (mouseY - y) / (y2 - y) : (mouseX - x) / (x2 - x);
        const p1 = {
            x,
            y
        };
        const p2 = {
            x: x2,
            y: y2
        };
        const a = pointInLine(p1, cp1, t);
        const b = pointInLine(cp1, cp2, t);
        const c = pointInLine(cp2, p2, t);
        const d = pointInLine(a, b, t);
        const e = pointInLine(b, c, t);
        const edge = pointInLine(d, e, t);
        return vertical ? mouseX >= edge.x && mouseX <= edge.x + width : mouseY >= edge.y && mouseY <= edge.y + height;
    }
 inXRange(mouseX, useFinalPosition) {
        const { x, x2, width } = this.getProps([
            'x',
            'x2',
            'width'
        ], useFinalPosition);
        const min = Math.min(x, x2);
        const max = Math.max(x, x2) + (this.options.orientation === 'vertical' ? width : 0);
        return mouseX >= min && mouseX <= max;
    }
 inYRange(mouseY, useFinalPosition) {
        const { y, y2, height } = this.getProps([
            'y',
            'y2',
            'height'
        ], useFinalPosition);
        const minY = Math.min(y, y2);
        const maxY = Math.max(y, y2) + (this.options.orientation === 'vertical' ? 0 : height);
        return mouseY >= minY && mouseY <= maxY;
    }
 getCenterPoint(useFinalPosition) {
        const { x, y, x2, y2, height, width } = this.getProps([
            'x',
            'y',
            'x2',
            'y2',
            'height',
            'width'
        ], useFinalPosition);
        const vertical = this.options.orientation === 'vertical';
        return {
            x: (x + x2 + (vertical ? width : 0)) / 2,
            y: (y + y2 + (vertical ? 0 : height)) / 2
        };
    }
    tooltipPosition(useFinalPosition = false) {
        return this.getCenterPoint(useFinalPosition);
    }
 getRange(axis) {
        const vertical = this.options.orientation === 'vertical';
        if (axis === 'x') return vertical ? this.width / 2 : 0;
        return vertical ? 0 : this.height / 2;
    }
    constructor(cfg){
        super(), this.flow = 0, this.x2 = 0, this.y2 = 0, this.width = 0, this.height = 0, this.progress = 1;
        if (cfg) {
            Object.assign(this, cfg);
        }
    }
}
Flow.id = 'flow';
Flow.defaults = {
    alpha: 0.5,
    colorFrom: 'red',
    colorMode: 'gradient',
    colorTo: 'green',
    flowColor: null,
    flowLabels: {
        borderRadius: 0,
        color: 'black',
        display: false,
        padding: 4,
        position: 'center'
    },
    hoverColorFrom: (_ctx, options)=>getHoverColorOption(options.colorFrom),
    hoverColorTo: (_ctx, options)=>getHoverColorOption(options.colorTo),
    orientation: 'horizontal'
};
Flow.descriptors = {
    _scriptable: true,
    flowLabels: {
        _scriptable: true
    }
};

export { Flow, SankeyController };
