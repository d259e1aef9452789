# Unity batches: the .cpp files of one folder compiled a few to a translation unit.
# Behind the precompiled header every translation unit spends about 12 CPU-s
# instantiating the templates that LibTorch's inline functions use (-ftime-report's
# "lang. deferred"; an empty .cpp file behind pch.h takes as long), whatever the file
# holds, then optimises what it emits; a batch pays the first once. Files in one batch
# share a translation unit: their file-local names (anonymous namespaces) must differ
# (tests/python/layout/test_unity.py).
#   xsagpt_unity_groups(PREFIX <prefix> BATCH <n> FOLDERS <dir>...)
# puts each folder's .cpp files, in name order, into ceil(files / n) groups of nearly
# equal size named <prefix><folder>_<i> (the targets set UNITY_BUILD_MODE GROUP).
function(xsagpt_unity_groups)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "PREFIX;BATCH" "FOLDERS")
  foreach(_dir IN LISTS arg_FOLDERS)
    if(NOT IS_DIRECTORY "${_dir}")
      continue()
    endif()
    file(GLOB _srcs CONFIGURE_DEPENDS "${_dir}/*.cpp")
    list(SORT _srcs)
    list(LENGTH _srcs _n)
    if(_n EQUAL 0)
      continue()
    endif()
    get_filename_component(_name "${_dir}" NAME)
    math(EXPR _batches "(${_n} + ${arg_BATCH} - 1) / ${arg_BATCH}")
    set(_i 0)
    foreach(_src IN LISTS _srcs)
      math(EXPR _batch "${_batches} * ${_i} / ${_n}")  # spread evenly, in name order
      set_source_files_properties(${_src} PROPERTIES UNITY_GROUP "${arg_PREFIX}${_name}_${_batch}")
      math(EXPR _i "${_i} + 1")
    endforeach()
  endforeach()
endfunction()
