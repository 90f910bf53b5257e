//! The scripts `resp_lua_libs` runs and the replies real Redis 7.0.15
//! gave them (`SHA` stands for the script's SHA1 in error replies).

/// `cjson` scripts and the replies Redis 7.0.15 gives them.
pub const CJSON: &[(&str, &[u8])] = &[
    (
        r##"return cjson.encode({1,2,3,"x",true,false})"##,
        b"$22\r\n[1,2,3,\"x\",true,false]\r\n",
    ),
    (
        r##"return cjson.encode({a=1})"##,
        b"$7\r\n{\"a\":1}\r\n",
    ),
    (
        r##"return cjson.encode({})"##,
        b"$2\r\n{}\r\n",
    ),
    (
        r##"return cjson.encode("a\"b\\c/d\1\8\9\10\12\13\127")"##,
        b"$34\r\n\"a\\\"b\\\\c\\/d\\u0001\\b\\t\\n\\f\\r\\u007f\"\r\n",
    ),
    (
        r##"return cjson.encode({0.1, 1/3, 1e15, 123456789012345678, -0.00001, 100, 2^53})"##,
        b"$78\r\n[0.1,0.33333333333333,1e+15,1.2345678901235e+17,-1e-05,100,9.007199254741e+15]\r\n",
    ),
    (
        r##"return cjson.encode({[1]=1,[2]=2,[4]=4})"##,
        b"$12\r\n[1,2,null,4]\r\n",
    ),
    (
        r##"return cjson.encode({[1]=1,[20]=2})"##,
        b"-ERR user_script:1: Cannot serialise table: excessively sparse array script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.encode({[1]=1,[11]=2})"##,
        b"-ERR user_script:1: Cannot serialise table: excessively sparse array script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.encode({1,2,nil,4})"##,
        b"$12\r\n[1,2,null,4]\r\n",
    ),
    (
        r##"return cjson.encode({[1.5]=1})"##,
        b"$9\r\n{\"1.5\":1}\r\n",
    ),
    (
        r##"return cjson.encode({[false]=1})"##,
        b"-ERR user_script:1: Cannot serialise boolean: table key must be a number or string script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.encode(function() end)"##,
        b"-ERR user_script:1: Cannot serialise function: type not supported script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.encode(0/0)"##,
        b"-ERR user_script:1: Cannot serialise number: must not be NaN or Inf script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.encode(1/0)"##,
        b"-ERR user_script:1: Cannot serialise number: must not be NaN or Inf script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.encode()"##,
        b"-ERR user_script:1: bad argument #1 to 'encode' (expected 1 argument) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.encode(1,2)"##,
        b"-ERR user_script:1: bad argument #1 to 'encode' (expected 1 argument) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.encode(cjson.null)"##,
        b"$4\r\nnull\r\n",
    ),
    (
        r##"return cjson.encode({cjson.null, nil})"##,
        b"$6\r\n[null]\r\n",
    ),
    (
        r##"return cjson.encode({{{{}}}})"##,
        b"$8\r\n[[[{}]]]\r\n",
    ),
    (
        r##"return table.concat(cjson.decode("[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]"), " ")"##,
        b"$26\r\n0 -5000 -1 0.0003 1023.2 0\r\n",
    ),
    (
        r##"local t = cjson.decode('{"a":{"b":[1,2,{"c":"d"}]},"e":null}') return {t.a.b[3].c, type(t.e), t.e == cjson.null, #t.a.b}"##,
        b"*4\r\n$1\r\nd\r\n$8\r\nuserdata\r\n:1\r\n:3\r\n",
    ),
    (
        r##"return cjson.decode('"\\u00e9\\ud83d\\ude00\\n\\/"')"##,
        b"$8\r\n\xc3\xa9\xf0\x9f\x98\x80\n/\r\n",
    ),
    (
        r##"return cjson.decode('{')"##,
        b"-ERR user_script:1: Expected object key string but found T_END at character 2 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('[1,]')"##,
        b"-ERR user_script:1: Expected value but found T_ARR_END at character 4 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('[1 2]')"##,
        b"-ERR user_script:1: Expected comma or array end but found T_NUMBER at character 4 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('{"a" 1}')"##,
        b"-ERR user_script:1: Expected colon but found T_NUMBER at character 6 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('{1:2}')"##,
        b"-ERR user_script:1: Expected object key string but found T_NUMBER at character 2 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('{"a":1,}')"##,
        b"-ERR user_script:1: Expected object key string but found T_OBJ_END at character 8 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('[1]x')"##,
        b"-ERR user_script:1: Expected the end but found invalid token at character 4 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('nul')"##,
        b"-ERR user_script:1: Expected value but found invalid token at character 1 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('"abc')"##,
        b"-ERR user_script:1: Expected value but found unexpected end of string at character 5 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('"\\x"')"##,
        b"-ERR user_script:1: Expected value but found invalid escape code at character 2 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('"\\ud800"')"##,
        b"-ERR user_script:1: Expected value but found invalid unicode escape code at character 2 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('"\\u12"')"##,
        b"-ERR user_script:1: Expected value but found invalid unicode escape code at character 2 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('')"##,
        b"-ERR user_script:1: Expected value but found T_END at character 1 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('  ')"##,
        b"-ERR user_script:1: Expected value but found T_END at character 3 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('a\0b')"##,
        b"-ERR user_script:1: JSON parser does not support UTF-16 or UTF-32 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('[1]\0garbage')"##,
        b"*1\r\n:1\r\n",
    ),
    (
        r##"return tostring(cjson.decode('0x10'))"##,
        b"$2\r\n16\r\n",
    ),
    (
        r##"return tostring(cjson.decode('-Infinity'))"##,
        b"$4\r\n-inf\r\n",
    ),
    (
        r##"return tostring(cjson.decode('+5'))"##,
        b"$1\r\n5\r\n",
    ),
    (
        r##"return tostring(cjson.decode('007'))"##,
        b"$1\r\n7\r\n",
    ),
    (
        r##"return tostring(cjson.decode('nan'))"##,
        b"$3\r\nnan\r\n",
    ),
    (
        r##"return cjson.decode('-')"##,
        b"-ERR user_script:1: Expected value but found invalid number at character 1 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode('1e')"##,
        b"-ERR user_script:1: Expected the end but found invalid token at character 2 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode(123)"##,
        b":123\r\n",
    ),
    (
        r##"return cjson.decode()"##,
        b"-ERR user_script:1: bad argument #1 to 'decode' (expected 1 argument) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode({})"##,
        b"-ERR user_script:1: bad argument #1 to 'decode' (string expected, got table) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.decode(string.rep('[', 1001) .. string.rep(']', 1001))"##,
        b"-ERR user_script:1: Found too many nested data structures (1001) at character 1001 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return #cjson.encode(cjson.decode(string.rep('[', 1000) .. string.rep(']', 1000)))"##,
        b":2000\r\n",
    ),
    (
        r##"local t = {} local c = t for i=1,1000 do c[1] = {} c = c[1] end return cjson.encode(t)"##,
        b"-ERR user_script:1: Cannot serialise, excessive nesting (1001) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"local t = {} local c = t for i=1,998 do c[1] = {} c = c[1] end return #cjson.encode(t)"##,
        b":1998\r\n",
    ),
    (
        r##"return {pcall(cjson.decode, '[1,')}"##,
        b"*2\r\n$-1\r\n$45\r\nExpected value but found T_END at character 4\r\n",
    ),
    (
        r##"return {pcall(cjson.encode, {[false]=1})}"##,
        b"*2\r\n$-1\r\n$62\r\nCannot serialise boolean: table key must be a number or string\r\n",
    ),
    (
        r##"return {cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision(), cjson.encode_keep_buffer(), cjson.encode_invalid_numbers(), cjson.decode_invalid_numbers()}"##,
        b"*6\r\n:1000\r\n:1000\r\n:14\r\n:1\r\n$-1\r\n:1\r\n",
    ),
    (
        r##"return {cjson.encode_sparse_array()}"##,
        b"*3\r\n$-1\r\n:2\r\n:10\r\n",
    ),
    (
        r##"return cjson.encode_max_depth(0)"##,
        b"-ERR user_script:1: bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.encode_max_depth('x')"##,
        b"-ERR user_script:1: bad argument #1 to 'encode_max_depth' (number expected, got string) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.encode_max_depth(1, 2)"##,
        b"-ERR user_script:1: bad argument #2 to 'encode_max_depth' (found too many arguments) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.encode_invalid_numbers('bogus')"##,
        b"-ERR user_script:1: bad argument #1 to 'encode_invalid_numbers' (invalid option 'bogus') script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cjson.encode_invalid_numbers('null')"##,
        b"$4\r\nnull\r\n",
    ),
    (
        r##"local j = cjson.new() j.encode_invalid_numbers(true) j.encode_number_precision(3) return {j.encode({1/0, 0/0, 3.14159}), cjson.encode_number_precision()}"##,
        b"*2\r\n$14\r\n[inf,nan,3.14]\r\n:14\r\n",
    ),
    (
        r##"local j = cjson.new() j.encode_invalid_numbers('null') return j.encode({1/0, 2})"##,
        b"$8\r\n[null,2]\r\n",
    ),
    (
        r##"local j = cjson.new() j.decode_invalid_numbers(false) return j.decode('0x10')"##,
        b"-ERR user_script:1: Expected value but found invalid number at character 1 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"local j = cjson.new() j.decode_invalid_numbers(false) return j.decode('[-Infinity]')"##,
        b"-ERR user_script:1: Expected value but found invalid number at character 2 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"local j = cjson.new() j.encode_sparse_array(true) return j.encode({[1]=1,[20]=2})"##,
        b"$14\r\n{\"1\":1,\"20\":2}\r\n",
    ),
    (
        r##"local j = cjson.new() j.encode_sparse_array(false, 0) return j.encode({[1]=1,[2000]=2})"##,
        b"$9995\r\n[1,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,null,2]\r\n",
    ),
    (
        r##"return {cjson._NAME, cjson._VERSION, type(cjson.null)}"##,
        b"*3\r\n$5\r\ncjson\r\n$5\r\n2.1.0\r\n$8\r\nuserdata\r\n",
    ),
    (
        r##"cjson.encode = function() return 1 end"##,
        b"-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"cjson.foo = 1"##,
        b"-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"local ok, e = pcall(cjson.decode, '[') return {type(e), e}"##,
        b"*2\r\n$6\r\nstring\r\n$45\r\nExpected value but found T_END at character 2\r\n",
    ),
    (
        r##"local ok, e = xpcall(function() return cjson.decode('[') end, function(e) return 'H:' .. e end) return e"##,
        b"$62\r\nH:user_script:1: Expected value but found T_END at character 2\r\n",
    ),
    (
        r##"local ok, e = pcall(function() local x = cjson.decode('[') end) return e"##,
        b"$60\r\nuser_script:1: Expected value but found T_END at character 2\r\n",
    ),
    (
        r##"local ok, e = pcall(error, 'plain') return e"##,
        b"$5\r\nplain\r\n",
    ),
    (
        r##"local ok, e = pcall(bit.tobit) return e"##,
        b"$54\r\nbad argument #1 to '?' (number expected, got no value)\r\n",
    ),
];

/// `cmsgpack` scripts and the replies Redis 7.0.15 gives them.
pub const CMSGPACK: &[(&str, &[u8])] = &[
    (
        r##"return cmsgpack.pack(0.1)"##,
        b"$9\r\n\xcb?\xb9\x99\x99\x99\x99\x99\x9a\r\n",
    ),
    (
        r##"return cmsgpack.pack(-1099511627776)"##,
        b"$9\r\n\xd3\xff\xff\xff\x00\x00\x00\x00\x00\r\n",
    ),
    (
        r##"return cmsgpack.pack(1, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296, -1, -32, -33, -128, -129, -32768, -32769, -2147483648, -2147483649)"##,
        b"$62\r\n\x01\x7f\xcc\x80\xcc\xff\xcd\x01\x00\xcd\xff\xff\xce\x00\x01\x00\x00\xce\xff\xff\xff\xff\xcf\x00\x00\x00\x01\x00\x00\x00\x00\xff\xe0\xd0\xdf\xd0\x80\xd1\xff\x7f\xd1\x80\x00\xd2\xff\xff\x7f\xff\xd2\x80\x00\x00\x00\xd3\xff\xff\xff\xff\x7f\xff\xff\xff\r\n",
    ),
    (
        r##"return cmsgpack.pack(1.5, 2^63, -2^63, 0/0, 1/0, -1/0, 2^64)"##,
        b"$43\r\n\xca?\xc0\x00\x00\xca_\x00\x00\x00\xd3\x80\x00\x00\x00\x00\x00\x00\x00\xcb\xff\xf8\x00\x00\x00\x00\x00\x00\xca\x7f\x80\x00\x00\xca\xff\x80\x00\x00\xca_\x80\x00\x00\r\n",
    ),
    (
        r##"return cmsgpack.pack("", string.rep("x", 31), string.rep("x", 32))"##,
        b"$67\r\n\xa0\xbfxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\xd9 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n",
    ),
    (
        r##"return #cmsgpack.pack(string.rep("x", 255), string.rep("x", 256), string.rep("x", 65535), string.rep("x", 65536))"##,
        b":131595\r\n",
    ),
    (
        r##"return cmsgpack.pack({}, {1,2}, {a=1}, {[1]=1,[3]=3}, true, false, nil, print)"##,
        b"-ERR user_script:1: Script attempted to access nonexistent global variable 'print' script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cmsgpack.pack(cjson.null, function() end)"##,
        b"$2\r\n\xc0\xc0\r\n",
    ),
    (
        r##"local a = {} for i=1,16 do a[i]=i end local m = {} for i=1,16 do m['k'..i]=i end return #cmsgpack.pack(a, m)"##,
        b":93\r\n",
    ),
    (
        r##"local a = {x=5} a.y = a return cmsgpack.pack(a)"##,
        b"$97\r\n\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\x82\xa1y\xc0\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\xa1x\x05\r\n",
    ),
    (
        r##"return cmsgpack.pack()"##,
        b"-ERR user_script:1: bad argument #0 to 'pack' (MessagePack pack needs input.) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return {cmsgpack.unpack(cmsgpack.pack(1, "a", true, {1,2}, {x="y"}))}"##,
        b"*5\r\n:1\r\n$1\r\na\r\n:1\r\n*2\r\n:1\r\n:2\r\n*0\r\n",
    ),
    (
        r##"return {cmsgpack.unpack("\202\64\73\15\219")}"##,
        b"*1\r\n:3\r\n",
    ),
    (
        r##"return {cmsgpack.unpack("\203\64\9\33\251\84\68\45\24")}"##,
        b"*1\r\n:3\r\n",
    ),
    (
        r##"return {cmsgpack.unpack("\207\255\255\255\255\255\255\255\255")}"##,
        b"*1\r\n:-1\r\n",
    ),
    (
        r##"return {cmsgpack.unpack("\211\128\0\0\0\0\0\0\0")}"##,
        b"*1\r\n:-9223372036854775808\r\n",
    ),
    (
        r##"return {cmsgpack.unpack("\208\128\209\128\0\210\128\0\0\0\204\255\205\255\255\206\255\255\255\255")}"##,
        b"*6\r\n:-128\r\n:-32768\r\n:-2147483648\r\n:255\r\n:65535\r\n:4294967295\r\n",
    ),
    (
        r##"return {cmsgpack.unpack("\219\0\0\0\3abc\218\0\1z\217\2xy")}"##,
        b"*3\r\n$3\r\nabc\r\n$1\r\nz\r\n$2\r\nxy\r\n",
    ),
    (
        r##"return {cmsgpack.unpack("\220\0\2\1\2")}"##,
        b"*1\r\n*2\r\n:1\r\n:2\r\n",
    ),
    (
        r##"return {cmsgpack.unpack("\221\0\0\0\1\1")}"##,
        b"*1\r\n*1\r\n:1\r\n",
    ),
    (
        r##"local t = cmsgpack.unpack("\222\0\1\161a\1") return t.a"##,
        b":1\r\n",
    ),
    (
        r##"local t = cmsgpack.unpack("\223\0\0\0\1\161a\2") return t.a"##,
        b":2\r\n",
    ),
    (
        r##"return cmsgpack.unpack("\193")"##,
        b"-ERR user_script:1: Bad data format in input. script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cmsgpack.unpack("\196\1a")"##,
        b"-ERR user_script:1: Bad data format in input. script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cmsgpack.unpack("\205\1")"##,
        b"-ERR user_script:1: Missing bytes in input. script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cmsgpack.unpack("\147\1\2")"##,
        b"-ERR user_script:1: Missing bytes in input. script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cmsgpack.unpack("\129\192\1")"##,
        b"-ERR table index is nil script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cmsgpack.unpack("")"##,
        b"$-1\r\n",
    ),
    (
        r##"return cmsgpack.unpack()"##,
        b"-ERR user_script:1: bad argument #1 to 'unpack' (string expected, got no value) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return {cmsgpack.unpack_one(cmsgpack.pack(1,2,3))}"##,
        b"*2\r\n:1\r\n:1\r\n",
    ),
    (
        r##"return {cmsgpack.unpack_one(cmsgpack.pack(1,2,3), 1)}"##,
        b"*2\r\n:2\r\n:2\r\n",
    ),
    (
        r##"return {cmsgpack.unpack_one(cmsgpack.pack(1,2,3), 2)}"##,
        b"*2\r\n:-1\r\n:3\r\n",
    ),
    (
        r##"return {cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 2)}"##,
        b"*3\r\n:2\r\n:1\r\n:2\r\n",
    ),
    (
        r##"return {cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 0, 0)}"##,
        b"*3\r\n:1\r\n:2\r\n:3\r\n",
    ),
    (
        r##"return {cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), 5, 1)}"##,
        b"*3\r\n:-1\r\n:2\r\n:3\r\n",
    ),
    (
        r##"return cmsgpack.unpack_one(cmsgpack.pack(1,2,3), -1)"##,
        b"-ERR user_script:1: Invalid request to unpack with offset of -1 and limit of 3. script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cmsgpack.unpack_one(cmsgpack.pack(1,2,3), 10)"##,
        b"-ERR user_script:1: Start offset 10 greater than input length 3. script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cmsgpack.unpack_limit(cmsgpack.pack(1,2,3), -1)"##,
        b"-ERR user_script:1: Invalid request to unpack with offset of 0 and limit of 3. script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return cmsgpack.unpack_limit("x")"##,
        b"-ERR user_script:1: bad argument #2 to 'unpack_limit' (number expected, got no value) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return {cmsgpack.unpack_one(cmsgpack.pack(1,2,3), 3)}"##,
        b"*1\r\n:-1\r\n",
    ),
    (
        r##"return {cmsgpack._NAME, cmsgpack._VERSION}"##,
        b"*2\r\n$8\r\ncmsgpack\r\n$18\r\nlua-cmsgpack 0.4.0\r\n",
    ),
    (
        r##"return {pcall(cmsgpack.unpack, "\193")}"##,
        b"*2\r\n$-1\r\n$25\r\nBad data format in input.\r\n",
    ),
    (
        r##"cmsgpack.pack = function() return 1 end"##,
        b"-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n",
    ),
];

/// `bit` scripts and the replies Redis 7.0.15 gives them.
pub const BIT: &[(&str, &[u8])] = &[
    (
        r##"return {bit.tobit(1), bit.tobit(2^32+5), bit.tobit(-1), bit.tobit(2^31), bit.tobit(1.5), bit.tobit(2.5), bit.tobit("12")}"##,
        b"*7\r\n:1\r\n:5\r\n:-1\r\n:-2147483648\r\n:2\r\n:2\r\n:12\r\n",
    ),
    (
        r##"return {bit.bnot(0), bit.band(0xff, 0x0f, 0x3), bit.bor(1,2,4,8,16,32,64,128), bit.bxor(1,3), bit.band(1)}"##,
        b"*5\r\n:-1\r\n:3\r\n:255\r\n:2\r\n:1\r\n",
    ),
    (
        r##"return {bit.lshift(1, 31), bit.lshift(1, 32), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.bswap(0x12345678)}"##,
        b"*7\r\n:-2147483648\r\n:1\r\n:15\r\n:-16\r\n:878082066\r\n:2014458966\r\n:2018915346\r\n",
    ),
    (
        r##"return {bit.tohex(255), bit.tohex(-1), bit.tohex(255, 2), bit.tohex(255, -4), bit.tohex(0x12345678, 12), bit.tohex(1, 0)}"##,
        b"*6\r\n$8\r\n000000ff\r\n$8\r\nffffffff\r\n$2\r\nff\r\n$4\r\n00FF\r\n$8\r\n12345678\r\n$0\r\n\r\n",
    ),
    (
        r##"return bit.tobit()"##,
        b"-ERR user_script:1: bad argument #1 to 'tobit' (number expected, got no value) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return bit.tobit("x")"##,
        b"-ERR user_script:1: bad argument #1 to 'tobit' (number expected, got string) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return bit.band(1, {})"##,
        b"-ERR user_script:1: bad argument #2 to 'band' (number expected, got table) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return bit.tohex(1, nil)"##,
        b"-ERR user_script:1: bad argument #2 to 'tohex' (number expected, got nil) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return {pcall(bit.tobit)}"##,
        b"*2\r\n$-1\r\n$54\r\nbad argument #1 to '?' (number expected, got no value)\r\n",
    ),
    (
        r##"return {bit.tobit(1/0), bit.tobit(0/0)}"##,
        b"*2\r\n:0\r\n:0\r\n",
    ),
    (
        r##"bit.lshift = function() return 1 end"##,
        b"-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n",
    ),
];

/// `struct` scripts and the replies Redis 7.0.15 gives them.
pub const STRUCT: &[(&str, &[u8])] = &[
    // Numbers out of an unsigned long's range convert as on x86-64.
    (
        r##"local t = {} for _, v in ipairs({2^64, 1e20, 0/0, -1e20, 2^63, -2^63-4096}) do t[#t+1] = string.byte(struct.pack('>L', v)) end return t"##,
        b"*6\r\n:0\r\n:0\r\n:128\r\n:128\r\n:128\r\n:128\r\n",
    ),
    // Formats are C strings: a zero byte ends them.
    (r##"return {struct.unpack('\0i', 'abcd')}"##, b"*1\r\n:1\r\n"),
    (r##"return struct.size('i\0i')"##, b":4\r\n"),
    (
        r##"return struct.pack('>i', 1)"##,
        b"$4\r\n\x00\x00\x00\x01\r\n",
    ),
    (
        r##"return struct.pack('<i', 1)"##,
        b"$4\r\n\x01\x00\x00\x00\r\n",
    ),
    (
        r##"return struct.pack('bBhHlLT', -1, 255, -2, 65535, -3, 4, 5)"##,
        b"$30\r\n\xff\xff\xfe\xff\xff\xff\xfd\xff\xff\xff\xff\xff\xff\xff\x04\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\r\n",
    ),
    (
        r##"return struct.pack('>i3I8', -2, 7)"##,
        b"$11\r\n\xff\xff\xfe\x00\x00\x00\x00\x00\x00\x00\x07\r\n",
    ),
    (
        r##"return struct.pack('!4 b i', 1, 2)"##,
        b"$8\r\n\x01\x00\x00\x00\x02\x00\x00\x00\r\n",
    ),
    (
        r##"return struct.pack('!b d', 1, 1.5)"##,
        b"$16\r\n\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf8?\r\n",
    ),
    (
        r##"return struct.pack('! b d', 1, 1.5)"##,
        b"$16\r\n\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xf8?\r\n",
    ),
    (
        r##"return struct.pack('>f d', 1.5, -2.25)"##,
        b"$12\r\n?\xc0\x00\x00\xc0\x02\x00\x00\x00\x00\x00\x00\r\n",
    ),
    (
        r##"return struct.pack('c3 c0 s x', 'abcdef', 'gh', 'ij')"##,
        b"$9\r\nabcghij\x00\x00\r\n",
    ),
    (
        r##"return struct.pack('c5', 'ab')"##,
        b"-ERR user_script:1: bad argument #3 to 'pack' (string too short) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return struct.pack('z', 1)"##,
        b"-ERR user_script:1: bad argument #1 to 'pack' (invalid format option 'z') script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return struct.pack('i33', 1)"##,
        b"-ERR user_script:1: integral size 33 is larger than limit of 32 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return struct.pack('!3', 1)"##,
        b"-ERR user_script:1: alignment 3 is not a power of 2 script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return struct.pack('i', 'x')"##,
        b"-ERR user_script:1: bad argument #2 to 'pack' (number expected, got string) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return struct.pack('i')"##,
        b"-ERR user_script:1: bad argument #2 to 'pack' (number expected, got nil) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return struct.pack('i99999999999', 1)"##,
        b"-ERR user_script:1: integral size overflow script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return {struct.unpack('>i', struct.pack('>i', -5))}"##,
        b"*2\r\n:-5\r\n:5\r\n",
    ),
    (
        r##"return {struct.unpack('<I2 b s c2', '\1\2\255hi\0zz')}"##,
        b"*5\r\n:513\r\n:-1\r\n$2\r\nhi\r\n$2\r\nzz\r\n:9\r\n",
    ),
    (
        r##"return {struct.unpack('b c0', '\3abcd')}"##,
        b"*2\r\n$3\r\nabc\r\n:5\r\n",
    ),
    (
        r##"return {struct.unpack('>d >f', struct.pack('>d >f', 1.25, -0.5))}"##,
        b"*3\r\n:1\r\n:0\r\n:13\r\n",
    ),
    (
        r##"return {struct.unpack('i', 'ab')}"##,
        b"-ERR user_script:1: bad argument #2 to 'unpack' (data string too short) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return {struct.unpack('i', '\1\0\0\0', 0)}"##,
        b"-ERR user_script:1: bad argument #3 to 'unpack' (offset must be 1 or greater) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return {struct.unpack('i', '\1\0\0\0', -1)}"##,
        b"-ERR user_script:1: bad argument #2 to 'unpack' (data string too short) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return {struct.unpack('b', '\1\2', 2)}"##,
        b"*2\r\n:2\r\n:3\r\n",
    ),
    (
        r##"return {struct.unpack('s', 'abc')}"##,
        b"-ERR user_script:1: unfinished string in data script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return {struct.unpack('c0', 'abc')}"##,
        b"-ERR user_script:1: format 'c0' needs a previous size script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return {struct.unpack('!4 b i', struct.pack('!4 b i', 7, 9))}"##,
        b"*3\r\n:7\r\n:9\r\n:9\r\n",
    ),
    (
        r##"return {struct.unpack('i16', string.rep('\255', 16))}"##,
        b"*2\r\n:-1\r\n:17\r\n",
    ),
    (
        r##"return tostring(struct.unpack('I8', string.rep('\255', 8)))"##,
        b"$18\r\n1.844674407371e+19\r\n",
    ),
    (
        r##"return {struct.size('i'), struct.size('!4 b i'), struct.size('bhlTdfx c3 I3'), struct.size('zq')}"##,
        b"*4\r\n:4\r\n:8\r\n:38\r\n:0\r\n",
    ),
    (
        r##"return struct.size('s')"##,
        b"-ERR user_script:1: bad argument #1 to 'size' (option 's' has no fixed size) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return struct.size('c0')"##,
        b"-ERR user_script:1: bad argument #1 to 'size' (option 'c0' has no fixed size) script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return struct.size('#')"##,
        b"-ERR user_script:1: bad argument #1 to 'size' (invalid format option '#') script: SHA, on @user_script:1.\r\n",
    ),
    (
        r##"return {pcall(struct.pack, 'z', 1)}"##,
        b"*2\r\n$-1\r\n$50\r\nbad argument #1 to '?' (invalid format option 'z')\r\n",
    ),
    (
        r##"struct.pack = 1"##,
        b"-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n",
    ),
];
